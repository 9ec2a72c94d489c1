// cpu_probe: how fast one core of this host runs Caffe's image data path, as one number that
// goes into every record (environment.cpu_probe). Image-file cells are decode-bound, and two
// machines of the same kind differed 2x in it, so a record must say how fast its host was.
//
// Two fixed works, one thread:
//  - images_per_second (for SECONDS): one 256x256 colour image (made here, the same bytes on
//    every machine), PNG-encoded once at zlib level 3 (OpenCV's default, as data_prep writes PNGs), then
//    cv::imdecode (what Caffe's Data layer calls) and Caffe's DataTransformer (CaffeNet's TRAIN
//    transform: 227 crop, mirror, per-channel mean) into a float blob: the pixel work.
//  - small_files_per_second (for SECONDS / 2): 2,000 files of one 28x28 grey PNG (MNIST's shape)
//    written to a new folder in $TMPDIR (or /tmp), so in the page cache, then read in turn as
//    ImageData reads them (caffe::ReadImageToCVMat: cv::imread) and transformed as LeNet's (scale 1/256): the
//    per-file work (path lookup, open, read, close) that dominates MNIST's and CIFAR-10's images,
//    and that the first work hardly touches; two hosts can rank differently on the two.
//
//   cpu_probe [SECONDS]   prints one JSON line: images_per_second, small_files_per_second, ...
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <opencv2/core/core.hpp>
#include <opencv2/imgcodecs/imgcodecs.hpp>

#include "caffe/blob.hpp"
#include "caffe/common.hpp"
#include "caffe/data_transformer.hpp"
#include "caffe/util/io.hpp"

using Clock = std::chrono::steady_clock;
const int kSmallFiles = 2000;

static cv::Mat FixedImage() {
  // smooth gradients with a small hash noise: compresses like a photograph, not like a flat field
  cv::Mat img(256, 256, CV_8UC3);
  uint32_t state = 12345;
  for (int y = 0; y < img.rows; ++y) {
    for (int x = 0; x < img.cols; ++x) {
      state = state * 1664525u + 1013904223u;
      const int noise = static_cast<int>(state >> 28);
      cv::Vec3b& p = img.at<cv::Vec3b>(y, x);
      p[0] = static_cast<uint8_t>((x + noise) & 255);
      p[1] = static_cast<uint8_t>((y + 2 * noise) & 255);
      p[2] = static_cast<uint8_t>(((x ^ y) + noise) & 255);
    }
  }
  return img;
}

static double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Reads and transforms the small files in turn for `seconds`; images/s, or < 0 on a failure
// (said on stderr). The folder and its files are removed whatever happens.
static double SmallFilesPerSecond(double seconds) {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/imgstore-cpu-probe-XXXXXX";
  if (!mkdtemp(&dir[0])) {
    std::perror("cpu_probe: mkdtemp");
    return -1;
  }
  cv::Mat digit(28, 28, CV_8UC1);
  for (int y = 0; y < 28; ++y) {
    for (int x = 0; x < 28; ++x) {  // a ring, like a pen stroke on a dark ground
      const int r2 = (x - 14) * (x - 14) + (y - 14) * (y - 14);
      digit.at<uint8_t>(y, x) = static_cast<uint8_t>(r2 > 30 && r2 < 80 ? 230 : 10);
    }
  }
  std::vector<uchar> png;
  cv::imencode(".png", digit, png, {cv::IMWRITE_PNG_COMPRESSION, 3});
  std::vector<std::string> paths;
  bool ok = true;
  for (int i = 0; i < kSmallFiles && ok; ++i) {
    paths.push_back(dir + "/" + std::to_string(i) + ".png");
    std::ofstream(paths.back(), std::ios::binary).write(reinterpret_cast<const char*>(png.data()), png.size());
    ok = static_cast<bool>(std::ifstream(paths.back()));
  }
  caffe::TransformationParameter param;
  param.set_scale(0.00390625);
  caffe::DataTransformer<float> transformer(param, caffe::TRAIN);
  transformer.InitRand();
  caffe::Blob<float> blob(1, 1, 28, 28);
  long images = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  while (ok && elapsed < seconds) {
    cv::Mat decoded = caffe::ReadImageToCVMat(paths[images % paths.size()], 0, 0, false);
    if (decoded.empty()) {
      std::fprintf(stderr, "cpu_probe: could not read back %s\n", paths[images % paths.size()].c_str());
      ok = false;
      break;
    }
    transformer.Transform(decoded, &blob);
    ++images;
    elapsed = Since(start);
  }
  for (const std::string& path : paths) unlink(path.c_str());
  rmdir(dir.c_str());
  return ok ? images / elapsed : -1;
}

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 1.0;
  if (!(seconds > 0)) {
    std::fprintf(stderr, "usage: cpu_probe [SECONDS > 0]\n");
    return 2;
  }
  caffe::Caffe::set_mode(caffe::Caffe::CPU);
  caffe::Caffe::set_random_seed(1);
  std::vector<uchar> png;
  cv::imencode(".png", FixedImage(), png, {cv::IMWRITE_PNG_COMPRESSION, 3});

  caffe::TransformationParameter param;
  param.set_crop_size(227);
  param.set_mirror(true);
  param.add_mean_value(104);
  param.add_mean_value(117);
  param.add_mean_value(123);
  caffe::DataTransformer<float> transformer(param, caffe::TRAIN);
  transformer.InitRand();
  caffe::Blob<float> blob(1, 3, 227, 227);

  const auto start = Clock::now();
  long images = 0;
  double elapsed = 0;
  do {
    cv::Mat decoded = cv::imdecode(png, cv::IMREAD_COLOR);
    if (decoded.empty()) {
      std::fprintf(stderr, "cpu_probe: OpenCV could not decode its own PNG\n");
      return 1;
    }
    transformer.Transform(decoded, &blob);
    ++images;
    elapsed = Since(start);
  } while (elapsed < seconds);
  const double small = SmallFilesPerSecond(seconds / 2);  // steady within 1% at 0.5 s
  if (small < 0) return 1;
  std::printf("{\"images_per_second\": %.1f, \"seconds\": %.3f, \"images\": %ld, \"png_bytes\": %zu, "
              "\"work\": \"PNG 256x256x3 decode + DataTransformer 227 crop/mirror/mean, one thread\", "
              "\"small_files_per_second\": %.1f, \"small_files_work\": \"%d files of a 28x28 grey PNG in the "
              "page cache: ReadImageToCVMat + DataTransformer scale, one thread\"}\n",
              images / elapsed, elapsed, images, png.size(), small, kSmallFiles);
  return 0;
}
