#!/usr/bin/env bash
# Build a minimal OpenCV (core, imgproc, imgcodecs with PNG and JPEG only) from Debian's own
# source of the OpenCV version Caffe was linked against, and print its install prefix.
#
# Why: Debian's libopencv_imgcodecs pulls in GDAL, OpenEXR, TIFF, WebP, GDCM and their
# closure (~200 MiB of shared libraries), far more than a GPU machine without a package
# registry can be sent. The same version with the same sonames, built without those codecs,
# is a drop-in replacement at run time: Caffe uses only imread/imdecode/resize/cvtColor.
set -euo pipefail
source "$(dirname "$0")/../scripts/defaults.sh"
cache=$IMGSTORE_CACHE
version=$(dpkg-query -W -f='${source:Version}' libopencv-core-dev 2>/dev/null || true)
[ -n "$version" ] || { echo "libopencv-core-dev is not installed (make caffe installs it)" >&2; exit 1; }
opts=(-DCMAKE_BUILD_TYPE=Release -DBUILD_LIST=core,imgproc,imgcodecs -DBUILD_SHARED_LIBS=ON
      -DBUILD_TESTS=OFF -DBUILD_PERF_TESTS=OFF -DBUILD_EXAMPLES=OFF -DBUILD_opencv_apps=OFF
      -DBUILD_JAVA=OFF -DBUILD_opencv_python3=OFF -DWITH_PNG=ON -DWITH_JPEG=ON
      -DWITH_TIFF=OFF -DWITH_WEBP=OFF -DWITH_OPENJPEG=OFF -DWITH_JASPER=OFF -DWITH_OPENEXR=OFF
      -DWITH_GDAL=OFF -DWITH_GDCM=OFF -DWITH_IMGCODEC_HDR=OFF -DWITH_IMGCODEC_SUNRASTER=OFF
      -DWITH_IMGCODEC_PXM=OFF -DWITH_IMGCODEC_PFM=OFF -DWITH_IPP=OFF -DWITH_ITT=OFF
      -DWITH_OPENCL=OFF -DWITH_CUDA=OFF -DWITH_EIGEN=OFF -DWITH_LAPACK=OFF -DWITH_TBB=OFF
      -DWITH_OPENMP=OFF -DWITH_PROTOBUF=OFF -DWITH_QUIRC=OFF -DWITH_ADE=OFF -DWITH_VA=OFF
      -DWITH_GTK=OFF -DWITH_QT=OFF -DWITH_FFMPEG=OFF -DWITH_GSTREAMER=OFF -DWITH_V4L=OFF
      -DWITH_1394=OFF -DOPENCV_GENERATE_PKGCONFIG=OFF)
key=$( { echo "$version"; echo "${opts[*]}"; } | sha256sum | cut -c1-12)
dir=$cache/opencv-minimal-$key
if [ -f "$dir/.complete" ]; then echo "$dir/install"; exit 0; fi

echo "Building a minimal OpenCV $version (core, imgproc, imgcodecs: PNG, JPEG) in $dir" >&2
rm -rf "$dir"
"$(dirname "$0")/debian_source.sh" "opencv=$version" "$dir/fetch"
tar -xJf "$dir"/fetch/opencv_*.orig.tar.xz -C "$dir"
mkdir -p "$dir/build"
(cd "$dir/build" && cmake "$dir"/opencv-*/ "${opts[@]}" "-DCMAKE_INSTALL_PREFIX=$dir/install" > cmake.log 2>&1 &&
 make -j"$(nproc)" > make.log 2>&1 && make install > install.log 2>&1) ||
  { tail -30 "$dir"/build/*.log >&2; echo "minimal OpenCV build failed: $dir/build" >&2; exit 1; }
rm -rf "$dir/fetch" "$dir"/opencv-*/
touch "$dir/.complete"
echo "$dir/install"
