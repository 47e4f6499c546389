/* One function per subcommand; each parses its own options and returns the process exit code. */
#ifndef TD_CLI_COMMANDS_H
#define TD_CLI_COMMANDS_H

int cmd_tokenize(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_decide(int argc, char **argv);
int cmd_metrics(int argc, char **argv);
int cmd_evaluate(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_savings(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_serve(int argc, char **argv);

#endif
