// A shared, file-backed memory mapping for Node (which has no mmap): map(path, bytes, writable)
// returns an ArrayBuffer whose memory is the file's pages (MAP_SHARED), so typed-array writes in the
// proxy land in the page cache, where another process mapping or reading the same file sees them
// without a system call per write. The mapping is released when the ArrayBuffer is collected.
// The file layout is defined in runtime/profiling/mmap-layout.ts and docs/profiling.md.
//
// A file shrunk under a mapping (`truncate -s 0`, `: > file`) makes every access to a page past
// its new end raise SIGBUS, which kills the process. So the addon keeps each writable mapping's
// file descriptor and handles SIGBUS: a fault inside one of its mappings sets the file back to the
// mapping's size (ftruncate is async-signal-safe; the pages past the cut read as zeros again) or,
// when that fails and for read-only mappings, puts anonymous zero pages over the mapping, and the
// faulting access is retried. faults() counts these repairs, so the proxy can rewrite the header
// and say so. A SIGBUS elsewhere goes to the handler that was installed before (or kills).
//
// One writer per file: a writable mapping takes an exclusive advisory lock on the file
// (flock LOCK_EX|LOCK_NB, held by the descriptor the mapping keeps) before it sizes the file, so a
// second proxy given the same path fails with SHM_FILE_LOCKED instead of clearing and
// sharing the first one's rows. Read-only mappings (`proxy profile --mmap`) take no lock.
// release(buffer) drops the lock of a mapping its owner has finished with (the mapping itself
// goes only when the buffer is collected, so a proxy started again in the same process would
// otherwise find its own old lock).
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
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

#define MAX_MAPPINGS 64

struct mapping { void *addr; size_t bytes; int fd; bool writable; };
static struct mapping mappings[MAX_MAPPINGS];
static volatile sig_atomic_t fault_count = 0;
static struct sigaction previous_bus;
static bool handler_installed = false;

static void on_sigbus(int sig, siginfo_t *info, void *ctx) {
  char *at = (char *)info->si_addr;
  for (int i = 0; i < MAX_MAPPINGS; i++) {
    struct mapping *m = &mappings[i];
    if (m->addr == NULL || at < (char *)m->addr || at >= (char *)m->addr + m->bytes) continue;
    int saved = errno;
    bool repaired = m->writable && m->fd >= 0 && ftruncate(m->fd, (off_t)m->bytes) == 0;
    if (!repaired) {
      void *r = mmap(m->addr, m->bytes, m->writable ? (PROT_READ | PROT_WRITE) : PROT_READ,
                     MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      repaired = r != MAP_FAILED;
    }
    errno = saved;
    if (repaired) {
      fault_count++;
      return; // the access is retried
    }
    break;
  }
  if (previous_bus.sa_flags & SA_SIGINFO) {
    if (previous_bus.sa_sigaction != NULL) { previous_bus.sa_sigaction(sig, info, ctx); return; }
  } else if (previous_bus.sa_handler != SIG_DFL && previous_bus.sa_handler != SIG_IGN && previous_bus.sa_handler != NULL) {
    previous_bus.sa_handler(sig);
    return;
  }
  signal(SIGBUS, SIG_DFL); // the fault repeats on return and kills, as without this handler
}

static void install_handler(void) {
  if (handler_installed) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGBUS, &sa, &previous_bus) == 0) handler_installed = true;
}

static void unmap(napi_env env, void *data, void *hint) {
  (void)env;
  for (int i = 0; i < MAX_MAPPINGS; i++) {
    if (mappings[i].addr != data) continue;
    mappings[i].addr = NULL;
    if (mappings[i].fd >= 0) close(mappings[i].fd);
    mappings[i].fd = -1;
  }
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

  // A writable mapping needs a slot: the slot keeps the descriptor that holds the lock.
  int slot = -1;
  for (int i = 0; i < MAX_MAPPINGS && slot < 0; i++) if (mappings[i].addr == NULL) slot = i;
  if (writable && slot < 0) return throw_errno(env, "cannot map (too many files mapped in this process)", path, EMFILE);

  int fd = open(path, writable ? (O_RDWR | O_CREAT | O_CLOEXEC) : (O_RDONLY | O_CLOEXEC), 0644);
  if (fd < 0) return throw_errno(env, "cannot open", path, errno);
  size_t bytes = (size_t)bytes_d;
  if (writable) {
    // Before anything changes the file: it may be another proxy's, in use.
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      close(fd);
      if (err != EWOULDBLOCK) return throw_errno(env, "cannot lock", path, err);
      char msg[MAX_PATH_BYTES + 128];
      snprintf(msg, sizeof msg, "another process holds %s (an exclusive lock on it)", path);
      napi_throw_error(env, "SHM_FILE_LOCKED", msg);
      return NULL;
    }
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
  if (addr == MAP_FAILED) {
    close(fd);
    return throw_errno(env, "cannot map", path, err);
  }
  // Registered for the SIGBUS handler; a writable mapping keeps its descriptor to restore the size.
  install_handler();
  if (slot >= 0) {
    mappings[slot].bytes = bytes;
    mappings[slot].writable = writable;
    mappings[slot].fd = writable ? fd : -1;
    mappings[slot].addr = addr; // last: the handler reads the entry once addr is set
  }
  if (!writable) close(fd); // the mapping keeps its own reference to the file

  napi_value ab;
  if (napi_create_external_arraybuffer(env, addr, bytes, unmap, (void *)(uintptr_t)bytes, &ab) != napi_ok) {
    if (slot >= 0) mappings[slot].addr = NULL;
    munmap(addr, bytes);
    if (writable) close(fd);
    napi_throw_error(env, "PROXY_ERR_MMAP", "cannot wrap the mapping in an ArrayBuffer");
    return NULL;
  }
  return ab;
}

// release(buffer: ArrayBuffer): boolean — drops the lock of a writable mapping (true if it held one).
// The mapping and its descriptor stay (the SIGBUS repair needs it) until the buffer is collected.
static napi_value release(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  void *data = NULL;
  size_t len = 0;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1
      || napi_get_arraybuffer_info(env, argv[0], &data, &len) != napi_ok) {
    napi_throw_type_error(env, NULL, "release(buffer)");
    return NULL;
  }
  bool done = false;
  for (int i = 0; i < MAX_MAPPINGS; i++) {
    if (mappings[i].addr != data || mappings[i].fd < 0) continue;
    done = flock(mappings[i].fd, LOCK_UN) == 0;
  }
  napi_value r;
  napi_get_boolean(env, done, &r);
  return r;
}

// faults(): number — how many SIGBUS faults in this addon's mappings were repaired so far.
static napi_value faults(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value n;
  napi_create_double(env, (double)fault_count, &n);
  return n;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "faults", NAPI_AUTO_LENGTH, faults, NULL, &fn);
  napi_set_named_property(env, exports, "faults", fn);
  napi_create_function(env, "map", NAPI_AUTO_LENGTH, map, NULL, &fn);
  napi_set_named_property(env, exports, "map", fn);
  napi_create_function(env, "release", NAPI_AUTO_LENGTH, release, NULL, &fn);
  napi_set_named_property(env, exports, "release", fn);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
