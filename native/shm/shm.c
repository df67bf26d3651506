// A shared, file-backed memory mapping for Node (which has no mmap): map(path, bytes, writable)
// returns an ArrayBuffer whose memory is the file's pages (MAP_SHARED), so typed-array writes in the
// proxy land in the page cache, where another process mapping or reading the same file sees them
// without a system call per write. The mapping is released when the ArrayBuffer is collected.
// The file layout is defined in runtime/profiling/mmap-layout.ts and docs/profiling.md.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <node_api.h>

#define MAX_PATH_BYTES 4096

static napi_value throw_errno(napi_env env, const char *what, const char *path, int err) {
  char msg[MAX_PATH_BYTES + 256];
  snprintf(msg, sizeof msg, "%s %s: %s", what, path, strerror(err));
  napi_throw_error(env, err == ENOENT ? "ENOENT" : "PROXY_ERR_MMAP", msg);
  return NULL;
}

static void unmap(napi_env env, void *data, void *hint) {
  (void)env;
  munmap(data, (size_t)(uintptr_t)hint);
}

// map(path: string, bytes: number, writable: boolean): ArrayBuffer
// writable: opens or creates the file (mode 0644), sets its size to `bytes`, maps it read-write.
// read-only: `bytes` 0 maps the whole file as it is; the file must exist.
static napi_value map(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3) {
    napi_throw_type_error(env, NULL, "map(path, bytes, writable)");
    return NULL;
  }
  char path[MAX_PATH_BYTES];
  size_t len = 0;
  if (napi_get_value_string_utf8(env, argv[0], path, sizeof path, &len) != napi_ok || len == 0 || len >= sizeof path - 1) {
    napi_throw_type_error(env, NULL, "path must be a non-empty string");
    return NULL;
  }
  double bytes_d = 0;
  if (napi_get_value_double(env, argv[1], &bytes_d) != napi_ok || bytes_d < 0 || bytes_d > 4294967296.0 * 4) {
    napi_throw_type_error(env, NULL, "bytes must be a number between 0 and 16 GiB");
    return NULL;
  }
  bool writable = false;
  napi_get_value_bool(env, argv[2], &writable);

  int fd = open(path, writable ? (O_RDWR | O_CREAT | O_CLOEXEC) : (O_RDONLY | O_CLOEXEC), 0644);
  if (fd < 0) return throw_errno(env, "cannot open", path, errno);
  size_t bytes = (size_t)bytes_d;
  if (writable) {
    if (ftruncate(fd, (off_t)bytes) != 0) {
      int err = errno;
      close(fd);
      return throw_errno(env, "cannot size", path, err);
    }
  } else {
    struct stat st;
    if (fstat(fd, &st) != 0) {
      int err = errno;
      close(fd);
      return throw_errno(env, "cannot stat", path, err);
    }
    if (bytes == 0 || bytes > (size_t)st.st_size) bytes = (size_t)st.st_size;
  }
  if (bytes == 0) {
    close(fd);
    return throw_errno(env, "cannot map an empty file", path, EINVAL);
  }
  void *addr = mmap(NULL, bytes, writable ? (PROT_READ | PROT_WRITE) : PROT_READ, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd); // the mapping keeps its own reference to the file
  if (addr == MAP_FAILED) return throw_errno(env, "cannot map", path, err);

  napi_value ab;
  if (napi_create_external_arraybuffer(env, addr, bytes, unmap, (void *)(uintptr_t)bytes, &ab) != napi_ok) {
    munmap(addr, bytes);
    napi_throw_error(env, "PROXY_ERR_MMAP", "cannot wrap the mapping in an ArrayBuffer");
    return NULL;
  }
  return ab;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "map", NAPI_AUTO_LENGTH, map, NULL, &fn);
  napi_set_named_property(env, exports, "map", fn);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
