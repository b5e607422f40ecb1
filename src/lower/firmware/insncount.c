/* src/lower/firmware/insncount.c - QEMU TCG plugin: counts the guest instructions a system
 * emulation executes and prints `insns: N` when QEMU exits.
 *
 * Written against QEMU's plugin API version 1 (QEMU 7.2). Debian ships no qemu-plugin.h,
 * so the few declarations this plugin uses are spelled out below; they follow the
 * signatures documented in QEMU's docs/devel/tcg-plugins.rst and include/qemu/qemu-plugin.h.
 *
 * Every translated instruction gets an inline "add 1 to the counter" op, so the count is
 * exact even when a translation block is left early (an exception, a semihosting call).
 * The machine is single-core (mps2-an385 / an386), so one counter suffices.
 *
 *   gcc -O2 -shared -fPIC -o libinsncount.so src/lower/firmware/insncount.c
 *   qemu-system-arm -M mps2-an386 -nographic -semihosting-config enable=on,target=native \
 *     -plugin ./libinsncount.so -d plugin -D insns.log -kernel firmware.elf
 *   -> insns.log: "insns: 123456"   (without -D the line goes to stderr)
 *
 * With the argument profile=FILE (`-plugin ./libinsncount.so,profile=prof.txt`) it also
 * counts each instruction address on its own and writes "address count" lines (hex, decimal)
 * to FILE at exit; profile_functions.py (beside it) turns two such files (one run and two
 * runs of the work) into instructions per function per run.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---- the plugin API subset (QEMU 7.2, QEMU_PLUGIN_VERSION 1) ---- */
#define INSNCOUNT_EXPORT __attribute__((visibility("default")))

typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t; /* only passed through: never dereferenced here */
struct qemu_plugin_tb;
struct qemu_plugin_insn;

enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };

typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn, enum qemu_plugin_op op, void *ptr,
                                                uint64_t imm);
void qemu_plugin_outs(const char *string);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);

/* QEMU refuses a plugin that does not export the API version it was built for. */
INSNCOUNT_EXPORT int qemu_plugin_version = 1;

/* ---- the counters ---- */
static uint64_t executed;

/* profile=FILE: one counter per instruction address, in an open-addressing table whose
 * slots never move (QEMU keeps the counter's address in the translated code). */
#define SLOTS (1u << 18) /* 256 Ki instructions: far more code than an MCU's flash holds */
static struct slot {
  uint64_t address, count;
  int used;
} slots[SLOTS];
static const char *profile_path;
static int profile_full;

static uint64_t *counter_of(uint64_t address) {
  uint32_t i = (uint32_t)(address * 0x9E3779B97F4A7C15ull >> 46) & (SLOTS - 1), probes;
  for (probes = 0; probes < SLOTS; ++probes, i = (i + 1) & (SLOTS - 1)) {
    if (!slots[i].used) slots[i].used = 1, slots[i].address = address;
    if (slots[i].address == address) return &slots[i].count;
  }
  return NULL;
}

/* At translation time: attach an inline increment to each instruction of the block (and
 * one to the instruction's own counter when profiling). */
static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
  size_t i, n = qemu_plugin_tb_n_insns(tb);
  (void)id;
  for (i = 0; i < n; ++i) {
    struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
    qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &executed, 1);
    if (profile_path) {
      uint64_t *c = counter_of(qemu_plugin_insn_vaddr(insn));
      if (c) qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, c, 1);
      else profile_full = 1;
    }
  }
}

static void write_profile(void) {
  uint32_t i;
  FILE *f = fopen(profile_path, "w");
  if (!f) {
    fprintf(stderr, "insncount: cannot write the profile %s\n", profile_path);
    return;
  }
  for (i = 0; i < SLOTS; ++i) {
    if (slots[i].used && slots[i].count) {
      fprintf(f, "%llx %llu\n", (unsigned long long)slots[i].address, (unsigned long long)slots[i].count);
    }
  }
  if (fclose(f) != 0) fprintf(stderr, "insncount: cannot write the profile %s\n", profile_path);
}

static void print_count(qemu_plugin_id_t id, void *userdata) {
  char line[64];
  (void)id;
  (void)userdata;
  snprintf(line, sizeof line, "insns: %llu\n", (unsigned long long)executed);
  qemu_plugin_outs(line);
  if (profile_path) {
    if (profile_full) qemu_plugin_outs("insncount: more instruction addresses than profile slots; profile incomplete\n");
    write_profile();
  }
}

INSNCOUNT_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv) {
  (void)info;
  if (argc > 1 || (argc == 1 && strncmp(argv[0], "profile=", 8) != 0) || (argc == 1 && argv[0][8] == '\0')) {
    fprintf(stderr, "insncount: takes no argument or profile=FILE\n");
    return -1;
  }
  if (argc == 1 && !(profile_path = strdup(argv[0] + 8))) return -1; /* QEMU frees its argv */
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
  qemu_plugin_register_atexit_cb(id, print_count, NULL);
  return 0;
}
