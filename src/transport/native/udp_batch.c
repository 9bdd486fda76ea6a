/*
 * sip-edge batched UDP engine (issue 27, docs/udp-engine.md).
 *
 * A Node-API addon (no V8 / node.h: one build serves every Node-API runtime) that
 * owns one UDP socket:
 *  - receive: on each readable wake-up of the libuv loop (uv_poll on the fd), one
 *    recvmmsg() fills up to `slots` slots of a preallocated slab (an ArrayBuffer JS
 *    holds too); lengths and peer addresses go into a meta ArrayBuffer; then ONE call
 *    into JS (`onBatch(count)`) through napi_make_callback, so process.nextTick and
 *    promise jobs run before it returns.
 *  - send: JS copies replies into a send slab and their destinations into a send
 *    meta ArrayBuffer, then calls flush(count): one sendmmsg() for all of them.
 *    What the kernel does not take (EAGAIN) is copied into a backlog and sent when
 *    the socket is writable again (uv_poll UV_WRITABLE); a backlog over its cap drops
 *    and counts.
 *  - datagrams larger than a slot (MSG_TRUNC) are counted and dropped.
 *
 * libuv: the node binary exports libuv's symbols; only a few functions of its stable
 * 1.x ABI are used and the poll handle is allocated with uv_handle_size(), so the
 * addon does not depend on the size of uv_poll_t of any one libuv version. uv.h is
 * used when the headers have it (Node's own include dir), else the declarations below.
 */
#define _GNU_SOURCE
#define NAPI_VERSION 8
#include <node_api.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <stdio.h>

#if defined(__has_include)
#if __has_include(<uv.h>)
#include <uv.h>
#define HAVE_UV_H 1
#endif
#endif

#ifndef HAVE_UV_H
/* The parts of libuv 1.x's ABI used here (uv.h: handle types, poll events, `data` first). */
typedef struct uv_loop_s uv_loop_t;
typedef struct uv_handle_s { void *data; } uv_handle_t;
typedef struct uv_poll_s uv_poll_t;
typedef void (*uv_poll_cb)(uv_poll_t *handle, int status, int events);
typedef void (*uv_close_cb)(uv_handle_t *handle);
enum { UV_READABLE = 1, UV_WRITABLE = 2 };
#define UV_POLL 8
size_t uv_handle_size(int type);
int uv_poll_init(uv_loop_t *loop, uv_poll_t *handle, int fd);
int uv_poll_start(uv_poll_t *handle, int events, uv_poll_cb cb);
int uv_poll_stop(uv_poll_t *handle);
void uv_close(uv_handle_t *handle, uv_close_cb close_cb);
#endif

/* Receive meta: RMETA_WORDS uint32 per slot. */
#define RMETA_WORDS 20
enum {
  RM_LEN = 0, RM_PORT = 1, RM_FAMILY = 2, RM_V4 = 3, RM_TEXT = 4, /* 48 bytes of IPv6 text, NUL padded */
  RM_AGE = 16 /* µs between the kernel's receipt (SO_TIMESTAMPNS) and this read; 0 when unknown */
};
#define CTRL_SIZE 64
/* Send meta: SMETA_WORDS uint32 per slot: offset, length, port, family (4|6), 16 address bytes. */
#define SMETA_WORDS 8
enum { SM_OFF = 0, SM_LEN = 1, SM_PORT = 2, SM_FAMILY = 3, SM_ADDR = 4 };
/* Stats: doubles. */
enum {
  ST_RECEIVED = 0, ST_TRUNCATED, ST_RECV_ERRORS, ST_WAKEUPS, ST_BATCHES, ST_SENT, ST_SEND_ERRORS,
  ST_QUEUED, ST_DROPPED, ST_BACKLOG, ST_SENDMMSG_CALLS, ST_COUNT
};

#define MAX_SEND_BATCH 256
#define BACKLOG_MAX_BYTES (16u << 20)

typedef struct pending {
  struct pending *next;
  struct sockaddr_storage addr;
  socklen_t addrlen;
  uint32_t len;
  unsigned char data[];
} pending_t;

typedef struct engine {
  napi_env env;
  int fd;
  int family; /* AF_INET or AF_INET6 (dual stack) */
  int closed;
  int events;
  uv_poll_t *poll;
  napi_ref on_batch;
  napi_ref self; /* keeps the JS wrapper alive while the socket is open */
  int hooked;    /* the env cleanup hook is registered */
  uint32_t fail_sends; /* tests: the next n sendmmsg calls act as EAGAIN */
  napi_ref bufs[5];
  napi_async_context async;
  /* receive */
  uint32_t slots, slot_size;
  unsigned char *rslab;
  uint32_t *rmeta;
  struct mmsghdr *rmsgs;
  struct iovec *riov;
  struct sockaddr_storage *raddr;
  unsigned char *rctrl; /* CTRL_SIZE of control data (the receive timestamp) per slot */
  /* send */
  uint32_t send_slots, send_bytes;
  unsigned char *sslab;
  uint32_t *smeta;
  struct mmsghdr smsgs[MAX_SEND_BATCH];
  struct iovec siov[MAX_SEND_BATCH];
  struct sockaddr_storage saddr[MAX_SEND_BATCH];
  pending_t *bl_head, *bl_tail;
  size_t bl_bytes;
  double *stats;
} engine_t;

#define CHECK(call)                                                     \
  do {                                                                  \
    napi_status s_ = (call);                                            \
    if (s_ != napi_ok) {                                                \
      napi_throw_error(env, "ENAPI", "udp_batch: Node-API call failed: " #call); \
      return NULL;                                                      \
    }                                                                   \
  } while (0)

static const char *errno_code(int e) {
  switch (e) {
    case EADDRINUSE: return "EADDRINUSE";
    case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case EINVAL: return "EINVAL";
    case EAFNOSUPPORT: return "EAFNOSUPPORT";
    case EMFILE: return "EMFILE";
    case ENOMEM: return "ENOMEM";
    default: return "EUDP";
  }
}

static napi_value throw_errno(napi_env env, const char *what, int e) {
  char msg[256];
  snprintf(msg, sizeof msg, "%s: %s (%s)", what, strerror(e), errno_code(e));
  napi_throw_error(env, errno_code(e), msg);
  return NULL;
}

static void on_poll(uv_poll_t *handle, int status, int events);

static void set_events(engine_t *e, int events) {
  if (e->closed || e->events == events) return;
  e->events = events;
  uv_poll_start(e->poll, events, on_poll);
}

/* Fills sockaddr from a send meta slot; 0 when the address is unusable. */
static socklen_t meta_addr(engine_t *e, const uint32_t *m, struct sockaddr_storage *ss) {
  const unsigned char *a = (const unsigned char *)(m + SM_ADDR);
  memset(ss, 0, sizeof *ss);
  if (m[SM_FAMILY] == 4 && e->family == AF_INET) {
    struct sockaddr_in *s = (struct sockaddr_in *)ss;
    s->sin_family = AF_INET;
    s->sin_port = htons((uint16_t)m[SM_PORT]);
    memcpy(&s->sin_addr, a, 4);
    return sizeof *s;
  }
  if (e->family == AF_INET6 && (m[SM_FAMILY] == 4 || m[SM_FAMILY] == 6)) {
    struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
    s->sin6_family = AF_INET6;
    s->sin6_port = htons((uint16_t)m[SM_PORT]);
    if (m[SM_FAMILY] == 4) { /* IPv4-mapped on a dual-stack socket */
      s->sin6_addr.s6_addr[10] = 0xff;
      s->sin6_addr.s6_addr[11] = 0xff;
      memcpy(&s->sin6_addr.s6_addr[12], a, 4);
    } else {
      memcpy(&s->sin6_addr, a, 16);
    }
    return sizeof *s;
  }
  return 0;
}

static void backlog_push(engine_t *e, const struct sockaddr_storage *addr, socklen_t alen, const void *data, uint32_t len) {
  if (e->bl_bytes + len > BACKLOG_MAX_BYTES) {
    e->stats[ST_DROPPED] += 1;
    return;
  }
  pending_t *p = malloc(sizeof *p + len);
  if (!p) {
    e->stats[ST_DROPPED] += 1;
    return;
  }
  p->next = NULL;
  memcpy(&p->addr, addr, alen);
  p->addrlen = alen;
  p->len = len;
  memcpy(p->data, data, len);
  if (e->bl_tail) e->bl_tail->next = p;
  else e->bl_head = p;
  e->bl_tail = p;
  e->bl_bytes += len;
  e->stats[ST_QUEUED] += 1;
  e->stats[ST_BACKLOG] += 1;
}

/*
 * Sends msgs[0..n); returns how many are done with (sent, or failed for good).
 * Not from the backlog: the rest (EAGAIN) is copied into the backlog.
 */
static unsigned send_batch(engine_t *e, struct mmsghdr *msgs, unsigned n, int from_backlog) {
  unsigned i = 0;
  while (i < n) {
    e->stats[ST_SENDMMSG_CALLS] += 1;
    int r;
    if (e->fail_sends > 0) {
      e->fail_sends--;
      r = -1;
      errno = EAGAIN;
    } else {
      r = sendmmsg(e->fd, msgs + i, n - i, MSG_DONTWAIT);
    }
    if (r > 0) {
      i += (unsigned)r;
      e->stats[ST_SENT] += r;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    e->stats[ST_SEND_ERRORS] += 1; /* this one datagram fails (bad address, EMSGSIZE…); go on */
    i++;
  }
  if (from_backlog) {
    /* msgs map to the first n backlog entries: free the i sent */
    for (unsigned k = 0; k < i; k++) {
      pending_t *p = e->bl_head;
      e->bl_head = p->next;
      if (!e->bl_head) e->bl_tail = NULL;
      e->bl_bytes -= p->len;
      e->stats[ST_BACKLOG] -= 1;
      free(p);
    }
  } else {
    for (unsigned k = i; k < n; k++) {
      backlog_push(e, (struct sockaddr_storage *)msgs[k].msg_hdr.msg_name, msgs[k].msg_hdr.msg_namelen,
                   msgs[k].msg_hdr.msg_iov[0].iov_base, (uint32_t)msgs[k].msg_hdr.msg_iov[0].iov_len);
    }
  }
  return i;
}

/* Sends from the backlog while the kernel takes it. */
static void drain_backlog(engine_t *e) {
  while (e->bl_head) {
    unsigned n = 0;
    for (pending_t *p = e->bl_head; p && n < MAX_SEND_BATCH; p = p->next, n++) {
      memset(&e->smsgs[n], 0, sizeof e->smsgs[n]);
      e->siov[n].iov_base = p->data;
      e->siov[n].iov_len = p->len;
      e->smsgs[n].msg_hdr.msg_name = &p->addr;
      e->smsgs[n].msg_hdr.msg_namelen = p->addrlen;
      e->smsgs[n].msg_hdr.msg_iov = &e->siov[n];
      e->smsgs[n].msg_hdr.msg_iovlen = 1;
    }
    if (send_batch(e, e->smsgs, n, 1) < n) break; /* the kernel is full: wait for writable */
  }
  set_events(e, e->bl_head ? (UV_READABLE | UV_WRITABLE) : UV_READABLE);
}

static void receive(engine_t *e) {
  for (uint32_t i = 0; i < e->slots; i++) {
    e->rmsgs[i].msg_hdr.msg_namelen = sizeof(struct sockaddr_storage);
    e->rmsgs[i].msg_hdr.msg_control = e->rctrl + (size_t)i * CTRL_SIZE;
    e->rmsgs[i].msg_hdr.msg_controllen = CTRL_SIZE;
    e->rmsgs[i].msg_hdr.msg_flags = 0;
  }
  int r;
  do {
    r = recvmmsg(e->fd, e->rmsgs, e->slots, MSG_DONTWAIT, NULL);
  } while (r < 0 && errno == EINTR);
  if (r < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK) e->stats[ST_RECV_ERRORS] += 1;
    return;
  }
  uint32_t n = 0;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  for (int i = 0; i < r; i++) {
    struct msghdr *h = &e->rmsgs[i].msg_hdr;
    uint32_t *m = e->rmeta + (size_t)i * RMETA_WORDS;
    m[RM_AGE] = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS && c->cmsg_len >= CMSG_LEN(sizeof(struct timespec))) {
        struct timespec ts;
        memcpy(&ts, CMSG_DATA(c), sizeof ts);
        int64_t us = ((int64_t)now.tv_sec - ts.tv_sec) * 1000000 + ((int64_t)now.tv_nsec - ts.tv_nsec) / 1000;
        m[RM_AGE] = us <= 0 ? 0 : us > 0xffffffffLL ? 0xffffffffu : (uint32_t)us;
      }
    }
    if (h->msg_flags & MSG_TRUNC) {
      e->stats[ST_TRUNCATED] += 1;
      m[RM_LEN] = 0;
      continue;
    }
    m[RM_LEN] = e->rmsgs[i].msg_len;
    struct sockaddr_storage *ss = &e->raddr[i];
    if (ss->ss_family == AF_INET) {
      struct sockaddr_in *s = (struct sockaddr_in *)ss;
      m[RM_FAMILY] = 4;
      m[RM_PORT] = ntohs(s->sin_port);
      m[RM_V4] = ntohl(s->sin_addr.s_addr);
    } else if (ss->ss_family == AF_INET6) {
      struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
      m[RM_PORT] = ntohs(s->sin6_port);
      if (IN6_IS_ADDR_V4MAPPED(&s->sin6_addr)) {
        uint32_t v4;
        memcpy(&v4, &s->sin6_addr.s6_addr[12], 4);
        m[RM_FAMILY] = 4;
        m[RM_V4] = ntohl(v4);
      } else {
        m[RM_FAMILY] = 6;
        char *text = (char *)(m + RM_TEXT);
        memset(text, 0, 48);
        inet_ntop(AF_INET6, &s->sin6_addr, text, 48);
      }
    } else {
      m[RM_LEN] = 0;
      continue;
    }
    n++;
  }
  e->stats[ST_RECEIVED] += n;
  if (n == 0) return;
  e->stats[ST_BATCHES] += 1;

  napi_env env = e->env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;
  napi_value cb, recv, argv[1], result;
  napi_get_reference_value(env, e->on_batch, &cb);
  napi_get_global(env, &recv); /* napi_make_callback needs an object */
  napi_create_uint32(env, (uint32_t)r, &argv[0]);
  napi_status s = napi_make_callback(env, e->async, recv, cb, 1, argv, &result);
  if (s == napi_pending_exception) {
    napi_value err;
    napi_get_and_clear_last_exception(env, &err);
    napi_fatal_exception(env, err);
  }
  napi_close_handle_scope(env, scope);
}

static void on_poll(uv_poll_t *handle, int status, int events) {
  engine_t *e = (engine_t *)((uv_handle_t *)handle)->data;
  if (!e || e->closed) return;
  e->stats[ST_WAKEUPS] += 1;
  if (status < 0) {
    e->stats[ST_RECV_ERRORS] += 1;
    return;
  }
  if (events & UV_WRITABLE) drain_backlog(e);
  if (!e->closed && (events & UV_READABLE)) receive(e);
}

static void free_poll(uv_handle_t *h) { free(h); }

static void engine_close(engine_t *e) {
  if (e->closed) return;
  e->closed = 1;
  uv_poll_stop(e->poll);
  ((uv_handle_t *)e->poll)->data = NULL;
  uv_close((uv_handle_t *)e->poll, free_poll);
  e->poll = NULL;
  close(e->fd);
  e->fd = -1;
  while (e->bl_head) {
    pending_t *p = e->bl_head;
    e->bl_head = p->next;
    free(p);
  }
  e->bl_tail = NULL;
  e->bl_bytes = 0;
  e->stats[ST_BACKLOG] = 0;
}

static void engine_release_refs(engine_t *e) {
  napi_env env = e->env;
  if (e->on_batch) napi_delete_reference(env, e->on_batch);
  for (int i = 0; i < 5; i++)
    if (e->bufs[i]) napi_delete_reference(env, e->bufs[i]);
  if (e->self) napi_delete_reference(env, e->self);
  e->on_batch = NULL;
  e->self = NULL;
  memset(e->bufs, 0, sizeof e->bufs);
  if (e->async) napi_async_destroy(env, e->async);
  e->async = NULL;
}

static void cleanup_hook(void *arg) {
  engine_t *e = arg;
  e->hooked = 0;
  engine_close(e);
}

static void finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  engine_t *e = data;
  if (!e->closed) engine_close(e);
  if (e->hooked) napi_remove_env_cleanup_hook(env, cleanup_hook, e);
  free(e->rmsgs);
  free(e->riov);
  free(e->raddr);
  free(e->rctrl);
  free(e);
}

static engine_t *get_engine(napi_env env, napi_value v) {
  void *p = NULL;
  if (napi_get_value_external(env, v, &p) != napi_ok || !p) {
    napi_throw_type_error(env, NULL, "udp_batch: not an engine");
    return NULL;
  }
  return p;
}

static napi_value make_ab(napi_env env, engine_t *e, int idx, size_t bytes, void **data) {
  napi_value ab;
  if (napi_create_arraybuffer(env, bytes, data, &ab) != napi_ok) return NULL;
  if (napi_create_reference(env, ab, 1, &e->bufs[idx]) != napi_ok) return NULL;
  memset(*data, 0, bytes);
  return ab;
}

/*
 * open(host, port, reusePort, recvBufferSize, sendBufferSize, slots, slotSize, sendSlots, sendBytes, onBatch)
 * → [engine, boundPort, recvSlab, recvMeta, sendSlab, sendMeta, stats]
 */
static napi_value js_open(napi_env env, napi_callback_info info) {
  size_t argc = 10;
  napi_value argv[10];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 10) {
    napi_throw_type_error(env, NULL, "udp_batch.open: 10 arguments");
    return NULL;
  }
  char host[64];
  size_t hl;
  uint32_t port, slots, slot_size, send_slots, send_bytes;
  int32_t rbuf, sbuf;
  bool reuse;
  CHECK(napi_get_value_string_utf8(env, argv[0], host, sizeof host, &hl));
  CHECK(napi_get_value_uint32(env, argv[1], &port));
  CHECK(napi_get_value_bool(env, argv[2], &reuse));
  CHECK(napi_get_value_int32(env, argv[3], &rbuf));
  CHECK(napi_get_value_int32(env, argv[4], &sbuf));
  CHECK(napi_get_value_uint32(env, argv[5], &slots));
  CHECK(napi_get_value_uint32(env, argv[6], &slot_size));
  CHECK(napi_get_value_uint32(env, argv[7], &send_slots));
  CHECK(napi_get_value_uint32(env, argv[8], &send_bytes));
  if (port > 65535 || slots == 0 || slots > 1024 || slot_size == 0 || slot_size > 65536 || send_slots == 0 ||
      send_slots > 4096 || send_bytes < 65536) {
    napi_throw_range_error(env, NULL, "udp_batch.open: bad sizes");
    return NULL;
  }

  struct sockaddr_storage ss;
  socklen_t sl;
  memset(&ss, 0, sizeof ss);
  int family;
  struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
  struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
  if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
    family = AF_INET;
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t)port);
    sl = sizeof *s4;
  } else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
    family = AF_INET6;
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons((uint16_t)port);
    sl = sizeof *s6;
  } else {
    napi_throw_error(env, "EINVAL", "udp_batch.open: host must be an IP address");
    return NULL;
  }

  int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return throw_errno(env, "socket", errno);
  int one = 1, zero = 0;
  if (family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  if (reuse && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0) {
    int err = errno;
    close(fd);
    return throw_errno(env, "setsockopt SO_REUSEPORT", err);
  }
  if (rbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rbuf, sizeof rbuf);
  setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one); /* the age of each datagram when read */
  if (sbuf > 0) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sbuf, sizeof sbuf);
  if (bind(fd, (struct sockaddr *)&ss, sl) < 0) {
    int err = errno;
    close(fd);
    return throw_errno(env, "bind", err);
  }
  struct sockaddr_storage bound;
  socklen_t bl = sizeof bound;
  getsockname(fd, (struct sockaddr *)&bound, &bl);
  uint32_t bport = ntohs(family == AF_INET ? ((struct sockaddr_in *)&bound)->sin_port : ((struct sockaddr_in6 *)&bound)->sin6_port);

  engine_t *e = calloc(1, sizeof *e);
  if (!e) {
    close(fd);
    return throw_errno(env, "calloc", ENOMEM);
  }
  e->env = env;
  e->fd = fd;
  e->family = family;
  e->slots = slots;
  e->slot_size = slot_size;
  e->send_slots = send_slots;
  e->send_bytes = send_bytes;
  e->rmsgs = calloc(slots, sizeof *e->rmsgs);
  e->riov = calloc(slots, sizeof *e->riov);
  e->raddr = calloc(slots, sizeof *e->raddr);
  e->rctrl = calloc(slots, CTRL_SIZE);
  napi_value out[7], ext, arr, resname;
  void *p;
  if (!e->rmsgs || !e->riov || !e->raddr || !e->rctrl) goto fail_mem;
  if (!(out[2] = make_ab(env, e, 0, (size_t)slots * slot_size, &p))) goto fail_mem;
  e->rslab = p;
  if (!(out[3] = make_ab(env, e, 1, (size_t)slots * RMETA_WORDS * 4, &p))) goto fail_mem;
  e->rmeta = p;
  if (!(out[4] = make_ab(env, e, 2, send_bytes, &p))) goto fail_mem;
  e->sslab = p;
  if (!(out[5] = make_ab(env, e, 3, (size_t)send_slots * SMETA_WORDS * 4, &p))) goto fail_mem;
  e->smeta = p;
  if (!(out[6] = make_ab(env, e, 4, ST_COUNT * sizeof(double), &p))) goto fail_mem;
  e->stats = p;
  for (uint32_t i = 0; i < slots; i++) {
    e->riov[i].iov_base = e->rslab + (size_t)i * slot_size;
    e->riov[i].iov_len = slot_size;
    e->rmsgs[i].msg_hdr.msg_iov = &e->riov[i];
    e->rmsgs[i].msg_hdr.msg_iovlen = 1;
    e->rmsgs[i].msg_hdr.msg_name = &e->raddr[i];
    e->rmsgs[i].msg_hdr.msg_namelen = sizeof e->raddr[i];
  }
  if (napi_create_reference(env, argv[9], 1, &e->on_batch) != napi_ok) goto fail_mem;
  napi_create_string_utf8(env, "sip-edge:udp-batch", NAPI_AUTO_LENGTH, &resname);
  if (napi_async_init(env, NULL, resname, &e->async) != napi_ok) goto fail_mem;

  uv_loop_t *loop;
  if (napi_get_uv_event_loop(env, (struct uv_loop_s **)&loop) != napi_ok) goto fail_mem;
  e->poll = calloc(1, uv_handle_size(UV_POLL));
  if (!e->poll) goto fail_mem;
  if (uv_poll_init(loop, e->poll, fd) != 0) {
    free(e->poll);
    e->poll = NULL;
    goto fail_mem;
  }
  ((uv_handle_t *)e->poll)->data = e;
  e->events = UV_READABLE;
  uv_poll_start(e->poll, UV_READABLE, on_poll);
  napi_add_env_cleanup_hook(env, cleanup_hook, e);
  e->hooked = 1;

  CHECK(napi_create_external(env, e, finalize, NULL, &ext));
  napi_create_reference(env, ext, 1, &e->self);
  out[0] = ext;
  napi_create_uint32(env, bport, &out[1]);
  CHECK(napi_create_array_with_length(env, 7, &arr));
  for (uint32_t i = 0; i < 7; i++) napi_set_element(env, arr, i, out[i]);
  return arr;

fail_mem:
  close(fd);
  engine_release_refs(e);
  free(e->rmsgs);
  free(e->riov);
  free(e->raddr);
  free(e->rctrl);
  free(e);
  napi_throw_error(env, "ENOMEM", "udp_batch.open: could not set up the engine");
  return NULL;
}

/* flush(engine, count): sends `count` queued datagrams of the send slab with sendmmsg. */
static napi_value js_flush(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  engine_t *e = get_engine(env, argv[0]);
  if (!e) return NULL;
  uint32_t count;
  CHECK(napi_get_value_uint32(env, argv[1], &count));
  if (e->closed || count == 0) return NULL;
  if (count > e->send_slots) count = e->send_slots;
  uint32_t i = 0;
  while (i < count) {
    unsigned n = 0;
    for (; i < count && n < MAX_SEND_BATCH; i++) {
      const uint32_t *m = e->smeta + (size_t)i * SMETA_WORDS;
      if (m[SM_OFF] > e->send_bytes || m[SM_LEN] > e->send_bytes - m[SM_OFF]) {
        e->stats[ST_SEND_ERRORS] += 1;
        continue;
      }
      socklen_t al = meta_addr(e, m, &e->saddr[n]);
      if (!al) {
        e->stats[ST_SEND_ERRORS] += 1;
        continue;
      }
      memset(&e->smsgs[n], 0, sizeof e->smsgs[n]);
      e->siov[n].iov_base = e->sslab + m[SM_OFF];
      e->siov[n].iov_len = m[SM_LEN];
      e->smsgs[n].msg_hdr.msg_name = &e->saddr[n];
      e->smsgs[n].msg_hdr.msg_namelen = al;
      e->smsgs[n].msg_hdr.msg_iov = &e->siov[n];
      e->smsgs[n].msg_hdr.msg_iovlen = 1;
      n++;
    }
    if (n == 0) continue;
    if (e->bl_head) {
      /* behind what waits already: keep the order */
      for (unsigned k = 0; k < n; k++)
        backlog_push(e, &e->saddr[k], e->smsgs[k].msg_hdr.msg_namelen, e->siov[k].iov_base, (uint32_t)e->siov[k].iov_len);
    } else {
      send_batch(e, e->smsgs, n, 0);
    }
  }
  if (e->bl_head) drain_backlog(e);
  return NULL;
}

/* pton(address) → [family, w0, w1, w2, w3] (the address bytes as four native uint32) or null. */
static napi_value js_pton(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], arr, v;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  char text[64];
  size_t l;
  if (napi_get_value_string_utf8(env, argv[0], text, sizeof text, &l) != napi_ok) return NULL;
  uint32_t w[4] = {0, 0, 0, 0};
  uint32_t family;
  if (inet_pton(AF_INET, text, w) == 1) family = 4;
  else if (inet_pton(AF_INET6, text, w) == 1) family = 6;
  else {
    napi_get_null(env, &v);
    return v;
  }
  CHECK(napi_create_array_with_length(env, 5, &arr));
  napi_create_uint32(env, family, &v);
  napi_set_element(env, arr, 0, v);
  for (uint32_t i = 0; i < 4; i++) {
    napi_create_uint32(env, w[i], &v);
    napi_set_element(env, arr, i + 1, v);
  }
  return arr;
}

/* close(engine): stops polling, closes the socket; queued datagrams are dropped. */
static napi_value js_close(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  engine_t *e = get_engine(env, argv[0]);
  if (!e) return NULL;
  if (!e->closed) {
    if (e->bl_head) e->stats[ST_DROPPED] += e->stats[ST_BACKLOG];
    engine_close(e);
    if (e->hooked) napi_remove_env_cleanup_hook(env, cleanup_hook, e);
    e->hooked = 0;
    engine_release_refs(e);
  }
  return NULL;
}

/* failSends(engine, n): tests only: the next n sendmmsg calls act as if the socket buffer were full. */
static napi_value js_fail_sends(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  engine_t *e = get_engine(env, argv[0]);
  if (!e) return NULL;
  CHECK(napi_get_value_uint32(env, argv[1], &e->fail_sends));
  return NULL;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"open", NULL, js_open, NULL, NULL, NULL, napi_default, NULL},
      {"flush", NULL, js_flush, NULL, NULL, NULL, napi_default, NULL},
      {"pton", NULL, js_pton, NULL, NULL, NULL, napi_default, NULL},
      {"close", NULL, js_close, NULL, NULL, NULL, napi_default, NULL},
      {"failSends", NULL, js_fail_sends, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_value v;
  if (napi_define_properties(env, exports, sizeof props / sizeof props[0], props) != napi_ok) return NULL;
  napi_create_uint32(env, RMETA_WORDS, &v);
  napi_set_named_property(env, exports, "RMETA_WORDS", v);
  napi_create_uint32(env, SMETA_WORDS, &v);
  napi_set_named_property(env, exports, "SMETA_WORDS", v);
  napi_create_uint32(env, 2, &v);
  napi_set_named_property(env, exports, "ABI", v);
  return exports;
}

#ifndef NODE_GYP_MODULE_NAME
#define NODE_GYP_MODULE_NAME udp_batch
#endif
NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
