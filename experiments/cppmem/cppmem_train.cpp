// cppmem: the paper's "in-memory arrays from C++". Loads the whole train and test arrays
// (data_prep/backends/cppmem.py writes them) into memory, hands them to the MemoryData
// layers of the solver's nets through Caffe's C++ API, then trains.
//
//   cppmem_train SOLVER TRAIN.f32 TEST.f32 [GPU_ID | -1]
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "caffe/caffe.hpp"
#include "caffe/layers/memory_data_layer.hpp"
#include "caffe/util/upgrade_proto.hpp"

using caffe::MemoryDataLayer;

struct Arrays {
  int n = 0, c = 0, h = 0, w = 0;
  std::vector<float> data, labels;
};

static Arrays Load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  CHECK(f) << path << ": cannot open";
  char magic[8];
  int32_t dims[4];
  f.read(magic, 8);
  f.read(reinterpret_cast<char*>(dims), sizeof(dims));
  CHECK(f && std::memcmp(magic, "CPPMEM01", 8) == 0) << path << ": not a cppmem file";
  Arrays a;
  a.n = dims[0]; a.c = dims[1]; a.h = dims[2]; a.w = dims[3];
  const size_t count = static_cast<size_t>(a.n) * a.c * a.h * a.w;
  a.data.resize(count);
  a.labels.resize(a.n);
  f.read(reinterpret_cast<char*>(a.data.data()), count * sizeof(float));
  f.read(reinterpret_cast<char*>(a.labels.data()), a.n * sizeof(float));
  CHECK(f) << path << ": truncated (expected " << a.n << " records)";
  return a;
}

// MemoryData needs a multiple of its batch size: wrap around, as a Data layer would.
static void PadToBatch(Arrays* a, int batch) {
  const size_t per = static_cast<size_t>(a->c) * a->h * a->w;
  for (int i = 0; a->n % batch != 0; ++i, ++a->n) {
    a->data.insert(a->data.end(), a->data.begin() + i * per, a->data.begin() + (i + 1) * per);
    a->labels.push_back(a->labels[i]);
  }
}

static void Feed(caffe::Net<float>* net, Arrays* a) {
  auto layer = boost::dynamic_pointer_cast<MemoryDataLayer<float> >(net->layers()[0]);
  CHECK(layer) << "the net's first layer must be MemoryData";
  PadToBatch(a, layer->batch_size());
  layer->Reset(a->data.data(), a->labels.data(), a->n);
}

int main(int argc, char** argv) {
  FLAGS_alsologtostderr = 1;
  google::InitGoogleLogging(argv[0]);
  if (argc < 4) {
    std::cerr << "usage: cppmem_train SOLVER TRAIN.f32 TEST.f32 [GPU_ID|-1]\n";
    return 2;
  }
  const int gpu = argc > 4 ? std::stoi(argv[4]) : -1;
  if (gpu >= 0) {
    caffe::Caffe::SetDevice(gpu);
    caffe::Caffe::set_mode(caffe::Caffe::GPU);
  } else {
    caffe::Caffe::set_mode(caffe::Caffe::CPU);
  }
  Arrays train = Load(argv[2]), test = Load(argv[3]);
  LOG(INFO) << "cppmem: loaded " << train.n << " train and " << test.n << " test records";
  caffe::SolverParameter param;
  caffe::ReadSolverParamsFromTextFileOrDie(argv[1], &param);
  boost::shared_ptr<caffe::Solver<float> > solver(
      caffe::SolverRegistry<float>::CreateSolver(param));
  Feed(solver->net().get(), &train);
  for (auto& net : solver->test_nets()) Feed(net.get(), &test);
  solver->Solve();
  return 0;
}
