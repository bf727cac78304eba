/*
 * The peer address a socket was accepted with, kept per file descriptor, so that asking for
 * it again costs no system call: a preload library for the redirector (scripts/redirector.sh
 * builds it into .build/peer-address.so and starts node with it in LD_PRELOAD).
 *
 * Why: this build of uWebSockets.js asks the kernel for the peer's address on every request
 * that reads it (`getpeername(2)` in `us_socket_remote_address`), and click capture reads it on
 * every click. Where the kernel isolates its page tables (Meltdown's mitigation) without PCID,
 * each system call also empties the TLB: 3.5 us of the capture redirector's ~24 us a request
 * on such a VM (docs/redirect-tier.md). A TCP connection's peer never changes, and accept(2)
 * already handed it over.
 *
 * The rule: `getpeername(fd)` answers from the table only for a descriptor that `accept` or
 * `accept4` returned with an address (uSockets passes one) and that has not been closed
 * since. Every call here that ends a descriptor or can hand its number out again for another
 * socket clears its entry first: close, close_range, closefrom, close or close_range through
 * syscall(2) (libuv's way), dup2, dup3, socket, socketpair, and accept/accept4 without an
 * address (libuv's way). Forgetting is always safe (the next read asks the kernel). Any
 * other descriptor, or one beyond the table, goes to the kernel as before. Not wrapped:
 * descriptors glibc closes inside itself (fclose of a FILE made on a socket) and the ways of
 * making a socket that pass none of these calls (fcntl(F_DUPFD), a descriptor received over a
 * Unix socket, an accept through io_uring): a socket whose accepted number was freed that way
 * and then reused that way could meet the old entry. Nothing in the redirector does either.
 *
 * Thread-safe: a descriptor's entry is written by the thread that accepted it, before its
 * number is known to anyone else, and cleared before the kernel can give the number out again.
 *
 * The current peer: each `recv` also notes, per thread, the kept IPv4 address of the socket it
 * read (IPv4-mapped IPv6 included), or that there is none. uSockets reads a connection's bytes
 * with one `recv` and calls the request handlers of what it read at once, on that thread,
 * before it reads any other socket: so while a handler runs, the note is its own connection's
 * peer. `read`, `readv`, `recvfrom` and `recvmsg` note their descriptor the same way, so the
 * note follows the last read of any kind (libuv's reads of its own sockets say none), and a
 * uSockets that read with another of these calls would still leave the right note.
 * infra/http/peer-address-view.c hands a request handler a view of this note
 * (`peer_address_current`), so the handler reads the address without a call into the
 * uWebSockets.js binding and without the ArrayBuffer that call allocates (UwsServer.ts reads
 * it only while the handler runs, and only then).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* Descriptors below this are kept (2 MB of address space; only the pages used are touched). */
#define TABLE_SIZE 65536

struct entry {
  /* 0: not kept; otherwise the address's length. */
  _Atomic socklen_t length;
  struct sockaddr_in6 address; /* large enough for IPv4 and IPv6 */
};

static struct entry table[TABLE_SIZE];

/* The peer of the socket this thread last read (recv, read, …): `kind` 4 with the IPv4 address as a
 * number in host order (a.b.c.d as a * 2^24 + b * 2^16 + c * 2^8 + d), or 0 when not kept. */
struct current_peer {
  uint32_t kind;
  uint32_t ipv4;
};
/* initial-exec: the library is preloaded, so its TLS is in the static block and each read
 * reaches the note without a call to __tls_get_addr. */
static __thread struct current_peer current __attribute__((tls_model("initial-exec")));

/* This thread's note (its address is fixed for the thread's life): for peer-address-view.c. */
struct current_peer *peer_address_current(void) { return &current; }

static int (*real_accept)(int, struct sockaddr *, socklen_t *);
static int (*real_accept4)(int, struct sockaddr *, socklen_t *, int);
static int (*real_getpeername)(int, struct sockaddr *, socklen_t *);
/* The read calls are resolved at their first use, not in the constructor: other libraries'
 * constructors may read before this one runs. */
static ssize_t (*real_recv)(int, void *, size_t, int);
static ssize_t (*real_recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
static ssize_t (*real_recvmsg)(int, struct msghdr *, int);
static ssize_t (*real_read)(int, void *, size_t);
static ssize_t (*real_readv)(int, const struct iovec *, int);
#define RESOLVE(name)                                              \
  do {                                                             \
    if (real_##name == NULL) real_##name = dlsym(RTLD_NEXT, #name); \
  } while (0)
static int (*real_close)(int);
static int (*real_dup2)(int, int);
static int (*real_dup3)(int, int, int);
static int (*real_socket)(int, int, int);
static int (*real_socketpair)(int, int, int, int[2]);
static long (*real_syscall)(long, ...);
static int (*real_close_range)(unsigned int, unsigned int, int);
static void (*real_closefrom)(int);

__attribute__((constructor)) static void peer_address_init(void) {
  real_accept = dlsym(RTLD_NEXT, "accept");
  real_accept4 = dlsym(RTLD_NEXT, "accept4");
  real_getpeername = dlsym(RTLD_NEXT, "getpeername");
  real_close = dlsym(RTLD_NEXT, "close");
  real_dup2 = dlsym(RTLD_NEXT, "dup2");
  real_dup3 = dlsym(RTLD_NEXT, "dup3");
  real_socket = dlsym(RTLD_NEXT, "socket");
  real_socketpair = dlsym(RTLD_NEXT, "socketpair");
  real_syscall = dlsym(RTLD_NEXT, "syscall");
  /* glibc 2.34 and later; NULL before. */
  real_close_range = dlsym(RTLD_NEXT, "close_range");
  real_closefrom = dlsym(RTLD_NEXT, "closefrom");
}

static void forget(long fd) {
  if (fd >= 0 && fd < TABLE_SIZE) atomic_store_explicit(&table[fd].length, 0, memory_order_release);
}

/* Forgets the descriptors first..last (as close_range(2) takes them) that the table holds. */
static void forget_range(unsigned long first, unsigned long last) {
  for (unsigned long fd = first; fd <= last && fd < TABLE_SIZE; fd++) forget((long)fd);
}

/*
 * After an accept: keeps the address it returned, or forgets the number's old one. `room` is
 * the caller's buffer size: an address longer than that came back cut short, and is not kept.
 */
static int accepted(int fd, const struct sockaddr *address, const socklen_t *length, socklen_t room) {
  if (fd < 0 || fd >= TABLE_SIZE) return fd;
  if (address != NULL && length != NULL && *length > 0 && *length <= room &&
      *length <= sizeof(struct sockaddr_in6)) {
    memcpy(&table[fd].address, address, *length);
    atomic_store_explicit(&table[fd].length, *length, memory_order_release);
  } else {
    forget(fd);
  }
  return fd;
}

int accept(int fd, struct sockaddr *address, socklen_t *length) {
  socklen_t room = length != NULL ? *length : 0;
  return accepted(real_accept(fd, address, length), address, length, room);
}

int accept4(int fd, struct sockaddr *address, socklen_t *length, int flags) {
  socklen_t room = length != NULL ? *length : 0;
  return accepted(real_accept4(fd, address, length, flags), address, length, room);
}

int getpeername(int fd, struct sockaddr *address, socklen_t *length) {
  if (fd >= 0 && fd < TABLE_SIZE && address != NULL && length != NULL) {
    socklen_t kept = atomic_load_explicit(&table[fd].length, memory_order_acquire);
    if (kept > 0) {
      /* As the kernel does: at most *length bytes copied, the full length reported. */
      memcpy(address, &table[fd].address, kept < *length ? kept : *length);
      *length = kept;
      return 0;
    }
  }
  return real_getpeername(fd, address, length);
}

/* Notes the kept IPv4 peer of `fd` as this thread's current peer, or that it has none. */
static void note_current(int fd) {
  uint32_t kind = 0, ipv4 = 0;
  if (fd >= 0 && fd < TABLE_SIZE && atomic_load_explicit(&table[fd].length, memory_order_acquire) > 0) {
    const struct sockaddr_in6 *a = &table[fd].address;
    if (a->sin6_family == AF_INET) {
      kind = 4;
      ipv4 = ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr);
    } else if (a->sin6_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
      const uint8_t *b = a->sin6_addr.s6_addr + 12;
      kind = 4;
      ipv4 = ((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) | b[3];
    }
  }
  current.ipv4 = ipv4;
  current.kind = kind;
}

ssize_t recv(int fd, void *buffer, size_t length, int flags) {
  note_current(fd);
  RESOLVE(recv);
  return real_recv(fd, buffer, length, flags);
}

ssize_t recvfrom(int fd, void *buffer, size_t length, int flags, struct sockaddr *address, socklen_t *address_length) {
  note_current(fd);
  RESOLVE(recvfrom);
  return real_recvfrom(fd, buffer, length, flags, address, address_length);
}

ssize_t recvmsg(int fd, struct msghdr *message, int flags) {
  note_current(fd);
  RESOLVE(recvmsg);
  return real_recvmsg(fd, message, flags);
}

ssize_t read(int fd, void *buffer, size_t length) {
  note_current(fd);
  RESOLVE(read);
  return real_read(fd, buffer, length);
}

ssize_t readv(int fd, const struct iovec *vectors, int count) {
  note_current(fd);
  RESOLVE(readv);
  return real_readv(fd, vectors, count);
}

int close(int fd) {
  forget(fd);
  return real_close(fd);
}

int dup2(int old_fd, int new_fd) {
  if (old_fd != new_fd) forget(new_fd);
  return real_dup2(old_fd, new_fd);
}

int dup3(int old_fd, int new_fd, int flags) {
  forget(new_fd);
  return real_dup3(old_fd, new_fd, flags);
}

int socket(int domain, int type, int protocol) {
  int fd = real_socket(domain, type, protocol);
  forget(fd);
  return fd;
}

int socketpair(int domain, int type, int protocol, int fds[2]) {
  int result = real_socketpair(domain, type, protocol, fds);
  if (result == 0) {
    forget(fds[0]);
    forget(fds[1]);
  }
  return result;
}

/* syscall(2) takes at most six arguments after the number; passing six is always safe. */
long syscall(long number, ...) {
  va_list ap;
  va_start(ap, number);
  long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
  long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
  va_end(ap);
  if (number == SYS_close) forget(a);
#ifdef SYS_close_range
  if (number == SYS_close_range) forget_range((unsigned int)a, (unsigned int)b);
#endif
  return real_syscall(number, a, b, c, d, e, f);
}

int close_range(unsigned int first, unsigned int last, int flags) {
  forget_range(first, last);
  if (real_close_range != NULL) return real_close_range(first, last, flags);
#ifdef SYS_close_range
  return (int)real_syscall(SYS_close_range, (long)first, (long)last, (long)flags, 0L, 0L, 0L);
#else
  errno = ENOSYS;
  return -1;
#endif
}

void closefrom(int low) {
  forget_range(low < 0 ? 0 : (unsigned long)low, TABLE_SIZE - 1);
  if (real_closefrom != NULL) {
    real_closefrom(low);
  } else {
    for (int fd = low < 0 ? 0 : low; fd < TABLE_SIZE; fd++) real_close(fd);
  }
}
