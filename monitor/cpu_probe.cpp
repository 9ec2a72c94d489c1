// cpu_probe: how fast one core of this host runs Caffe's image data path, as one number that
// goes into every record (environment.cpu_probe). Image-file cells are decode-bound, and two
// machines of the same kind differed 2x in it, so a record must say how fast its host was.
//
// The work is fixed: one 256x256 colour image (made here, the same bytes on every machine),
// PNG-encoded once at zlib level 3 (OpenCV's default, as data_prep writes PNGs), then for about
// SECONDS: cv::imdecode (what Caffe's ImageData/Data layers call) and Caffe's DataTransformer
// (CaffeNet's TRAIN transform: 227 crop, mirror, per-channel mean) into a float blob. One thread.
//
//   cpu_probe [SECONDS]   prints one JSON line: images_per_second, seconds, images, work
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <opencv2/core/core.hpp>
#include <opencv2/imgcodecs/imgcodecs.hpp>

#include "caffe/blob.hpp"
#include "caffe/common.hpp"
#include "caffe/data_transformer.hpp"

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

  using Clock = std::chrono::steady_clock;
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
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds);
  std::printf("{\"images_per_second\": %.1f, \"seconds\": %.3f, \"images\": %ld, \"png_bytes\": %zu, "
              "\"work\": \"PNG 256x256x3 decode + DataTransformer 227 crop/mirror/mean, one thread\"}\n",
              images / elapsed, elapsed, images, png.size());
  return 0;
}
