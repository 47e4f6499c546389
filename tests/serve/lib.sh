# Shared by the tests that start `typedecide serve --port 0` (sourced).
# serve_url LOG PID: waits up to 30 s for the server (PID, its stderr in LOG) to print where it listens and prints
# that URL; prints nothing (status 1) when the server exited first or did not say it in time.
serve_url() {
    local u
    for _ in $(seq 1 300); do
        u=$(grep -o 'listening on http://[0-9.]*:[0-9]*' "$1" | sed 's/listening on //')
        [ -n "$u" ] && { printf '%s\n' "$u"; return 0; }
        kill -0 "$2" 2>/dev/null || break
        sleep 0.1
    done
    return 1
}
