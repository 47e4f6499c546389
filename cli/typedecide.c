/* typedecide — the command-line tool: one subcommand per job. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "typedecide.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"decide", cmd_decide, "typed decisions: a probability per option for each criterion over shared evidence"},
    {"evaluate", cmd_evaluate, "score a labelled fixture: accuracy, calibration, order bias (readout or generation)"},
    {"run", cmd_run, "decide a whole JSONL corpus: resumable, crash-safe, sharded (--shard I/N) or under mpirun"},
    {"merge", cmd_merge, "join the results of shards (run --shard I/N) into input order"},
    {"metrics", cmd_metrics, "accuracy, calibration and order-bias metrics from saved predictions"},
    {"tokenize", cmd_tokenize, "text -> token ids (and back), exactly as Hugging Face tokenizers"},
    {"logits", cmd_logits, "raw float32 logits for every position of an id sequence"},
    {"export", cmd_export, "write GGUF (f32/f16/bf16/q8_0/q4_0), optionally with the head pruned to the letters"},
    {"inspect", cmd_inspect, "what is inside a model: architecture, tensors, tied head, slot map"},
    {"savings", cmd_savings, "the arithmetic of pruning the head to the option letters"},
    {"generate", cmd_generate, "greedy or sampled continuation of a prompt"},
    {"chat", cmd_chat, "a conversation: streamed answers, KV reused across turns (terminal or piped)"},
    {"synth", cmd_synth, "write a random-weight checkpoint of a real architecture's shape"},
    {"serve", cmd_serve, "HTTP server: OpenAI-compatible generation, /v1/decide, tokenize, a web page"},
    {"bench", cmd_bench, "measure load time, prefill and decode speed (JSON)"},
};

static void usage(FILE *f) {
    fprintf(f,
            "typedecide %s — typed decisions with small local language models\n\n"
            "usage: typedecide COMMAND [options]   (typedecide COMMAND --help for each)\n\ncommands:\n",
            TD_VERSION_STRING);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nM (--model) is a Hugging Face model directory: config.json, *.safetensors, tokenizer.json, ...\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return cli_finish_output("--help");
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("typedecide %s (library %s, kernels %s)\n", TD_VERSION_STRING, td_version(), td_cpu_kernels());
        return cli_finish_output("--version");
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) {
            int rc = commands[i].run(argc - 1, argv + 1);
            int out = cli_finish_output(commands[i].name); /* a full disk is a failure, whatever was printed */
            return rc ? rc : out;
        }
    fprintf(stderr, "typedecide: unknown command \"%s\"\n\n", argv[1]);
    usage(stderr);
    return 2;
}
