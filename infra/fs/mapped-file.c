/*
 * A Node-API addon: `map(fd, length)` gives an ArrayBuffer over the first `length` bytes of an
 * open file, mapped shared (MAP_SHARED): what is stored into it is in the kernel's page cache
 * at once, so it survives the process being killed (kill -9, OOM) with no system call per
 * store. The blocks are allocated first (posix_fallocate), so a store never meets a full disk
 * (which would end the process with SIGBUS): a full disk fails `map` instead. The mapping is
 * undone when the ArrayBuffer is collected.
 *
 * The click spool maps its files through it (apps/redirector/ClickSpool.ts). Built by
 * scripts/mapped-file.sh into .build/mapped-file.node with node's own headers;
 * infra/fs/MappedFile.ts loads it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <node_api.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

static void unmap(napi_env env, void *data, void *hint) {
  (void)env;
  munmap(data, (size_t)(uintptr_t)hint);
}

static napi_value map(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  int32_t fd;
  int64_t length;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 ||
      napi_get_value_int32(env, argv[0], &fd) != napi_ok || napi_get_value_int64(env, argv[1], &length) != napi_ok ||
      fd < 0 || length <= 0 || length > ((int64_t)1 << 40)) {
    napi_throw_type_error(env, NULL, "map(fd, length): an open file and a length in bytes");
    return NULL;
  }
  int error = posix_fallocate(fd, 0, (off_t)length);
  if (error != 0) {
    napi_throw_error(env, "ENOSPC", strerror(error));
    return NULL;
  }
  void *p = mmap(NULL, (size_t)length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    napi_throw_error(env, NULL, strerror(errno));
    return NULL;
  }
  napi_value buffer;
  if (napi_create_external_arraybuffer(env, p, (size_t)length, unmap, (void *)(uintptr_t)length, &buffer) != napi_ok) {
    munmap(p, (size_t)length);
    napi_throw_error(env, NULL, "cannot make an ArrayBuffer of the mapping");
    return NULL;
  }
  return buffer;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_value fn;
  if (napi_create_function(env, "map", NAPI_AUTO_LENGTH, map, NULL, &fn) == napi_ok)
    napi_set_named_property(env, exports, "map", fn);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
