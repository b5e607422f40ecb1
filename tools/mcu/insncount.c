/* tools/mcu/insncount.c - QEMU TCG plugin: counts the guest instructions a system
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
 *   gcc -O2 -shared -fPIC -o libinsncount.so tools/mcu/insncount.c
 *   qemu-system-arm -M mps2-an386 -nographic -semihosting-config enable=on,target=native \
 *     -plugin ./libinsncount.so -d plugin -D insns.log -kernel firmware.elf
 *   -> insns.log: "insns: 123456"   (without -D the line goes to stderr)
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

/* QEMU refuses a plugin that does not export the API version it was built for. */
INSNCOUNT_EXPORT int qemu_plugin_version = 1;

/* ---- the counter ---- */
static uint64_t executed;

/* At translation time: attach an inline increment to each instruction of the block. */
static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
  size_t i, n = qemu_plugin_tb_n_insns(tb);
  (void)id;
  for (i = 0; i < n; ++i) {
    qemu_plugin_register_vcpu_insn_exec_inline(qemu_plugin_tb_get_insn(tb, i), QEMU_PLUGIN_INLINE_ADD_U64, &executed, 1);
  }
}

static void print_count(qemu_plugin_id_t id, void *userdata) {
  char line[64];
  (void)id;
  (void)userdata;
  snprintf(line, sizeof line, "insns: %llu\n", (unsigned long long)executed);
  qemu_plugin_outs(line);
}

INSNCOUNT_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv) {
  (void)info;
  (void)argv;
  if (argc != 0) {
    fprintf(stderr, "insncount: takes no arguments\n");
    return -1;
  }
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
  qemu_plugin_register_atexit_cb(id, print_count, NULL);
  return 0;
}
