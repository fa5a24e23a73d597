// nfqdelay: holds every packet of one NFQUEUE for a fixed time, then accepts it, in arrival
// order. The emulated cluster uses it for link latency because this kernel has no netem.
// Only packet metadata crosses to user space (NFQNL_COPY_META); GSO packets stay whole.
//
//   nfqdelay QUEUE_NUM DELAY_US        (runs until SIGTERM/SIGINT, then releases all it holds)
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>

#define HELD_CAPACITY (1u << 18)

// Every packet gets the same delay, so a FIFO is ordered by release time too.
static struct held_packet { uint32_t id; uint64_t due_ns; } held[HELD_CAPACITY];
static size_t head, tail;
static uint64_t delay_ns;
static volatile sig_atomic_t stop_requested;

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int on_packet(struct nfq_q_handle* queue, struct nfgenmsg* msg, struct nfq_data* data,
                     void* user) {
  (void)msg;
  (void)user;
  uint32_t id = ntohl(nfq_get_msg_packet_hdr(data)->packet_id);
  if (tail - head >= HELD_CAPACITY) return nfq_set_verdict(queue, id, NF_ACCEPT, 0, NULL);
  held[tail % HELD_CAPACITY].id = id;
  held[tail % HELD_CAPACITY].due_ns = now_ns() + delay_ns;
  tail++;
  return 0;
}

static void on_signal(int sig) {
  (void)sig;
  stop_requested = 1;
}

static void release_due(struct nfq_q_handle* queue, uint64_t until_ns) {
  while (head != tail && held[head % HELD_CAPACITY].due_ns <= until_ns) {
    nfq_set_verdict(queue, held[head % HELD_CAPACITY].id, NF_ACCEPT, 0, NULL);
    head++;
  }
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: nfqdelay QUEUE_NUM DELAY_US\n");
    return 2;
  }
  delay_ns = strtoull(argv[2], NULL, 10) * 1000ull;
  prctl(PR_SET_TIMERSLACK, 1UL);  // wake-ups on time, not up to 50 us late
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);

  struct nfq_handle* nfq = nfq_open();
  if (!nfq) { perror("nfqdelay: nfq_open"); return 1; }
  struct nfq_q_handle* queue = nfq_create_queue(nfq, (uint16_t)atoi(argv[1]), on_packet, NULL);
  if (!queue) { perror("nfqdelay: nfq_create_queue"); return 1; }
  nfq_set_mode(queue, NFQNL_COPY_META, 0);
  nfq_set_queue_maxlen(queue, 65536);
  // F_GSO: no re-segmentation for us; F_FAIL_OPEN: accept rather than drop if we fall behind.
  nfq_set_queue_flags(queue, NFQA_CFG_F_GSO | NFQA_CFG_F_FAIL_OPEN,
                      NFQA_CFG_F_GSO | NFQA_CFG_F_FAIL_OPEN);
  nfnl_rcvbufsiz(nfq_nfnlh(nfq), 8 << 20);

  int fd = nfq_fd(nfq);
  static char buf[65536];
  while (!stop_requested) {
    struct timespec timeout, *wait = NULL;
    if (head != tail) {
      int64_t dt = (int64_t)(held[head % HELD_CAPACITY].due_ns - now_ns());
      if (dt < 0) dt = 0;
      timeout.tv_sec = dt / 1000000000;
      timeout.tv_nsec = dt % 1000000000;
      wait = &timeout;
    }
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (ppoll(&p, 1, wait, NULL) > 0) {
      ssize_t n;
      while ((n = recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) nfq_handle_packet(nfq, buf, (int)n);
    }
    release_due(queue, now_ns());
  }
  release_due(queue, UINT64_MAX);
  nfq_destroy_queue(queue);
  nfq_close(nfq);
  return 0;
}
