/* typedecide bench serve (bench_serve.c): throughput of the server under concurrent clients. */
#ifndef TD_CLI_BENCH_SERVE_H
#define TD_CLI_BENCH_SERVE_H

/* argv[0] is "serve"; returns the exit code. */
int bench_serve(int argc, char **argv);

#endif
