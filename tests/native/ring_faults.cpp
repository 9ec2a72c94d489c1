// A reader of an lmdb_read SHARED ring for tests/test_ring_faults.py: Caffe's own ring code
// (db_lmdb_shared.cpp from the patched source), compiled with CAFFE_RING_FAULT_HOOKS so that
// CAFFE_RING_FAULT=POINT:N ends the process at an exact point, as a kill there would. Never
// part of a build that trains.
//
//   ring_faults DB_FOLDER COUNT [RING_MB]   prints the key of each of COUNT records it takes,
//                                           "end-of-pass" after the database's last
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>

#include "caffe/common.hpp"
#include "caffe/util/db_lmdb_shared.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s DB_FOLDER COUNT [RING_MB]\n", argv[0]);
    return 2;
  }
  FLAGS_logtostderr = 1;
  google::InitGoogleLogging(argv[0]);
  const long count = atol(argv[2]);
  const size_t ring_bytes = size_t(argc > 3 ? atol(argv[3]) : 1) << 20;
  MDB_env* env;
  MDB_txn* txn;
  MDB_dbi dbi;
  CHECK_EQ(mdb_env_create(&env), MDB_SUCCESS);
  CHECK_EQ(mdb_env_open(env, argv[1], MDB_RDONLY | MDB_NOTLS, 0664), MDB_SUCCESS) << argv[1];
  CHECK_EQ(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), MDB_SUCCESS);
  CHECK_EQ(mdb_dbi_open(txn, NULL, 0, &dbi), MDB_SUCCESS);
  mdb_txn_abort(txn);
  {
    caffe::db::LMDBSharedCursor cursor(env, dbi, ring_bytes, 64 << 10, 1 << 20);
    for (long taken = 0; taken < count; ++taken) {
      if (!cursor.valid()) {
        printf("end-of-pass\n");
        cursor.SeekToFirst();
      }
      printf("%s\n", cursor.key().c_str());
      fflush(stdout);
      cursor.Next();
    }
  }
  mdb_env_close(env);
  return 0;
}
