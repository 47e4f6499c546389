// The text of a bench result file, shared by bench/peer.sh and bench/kernel_sets.sh: HEAD (what, machine, table, ...)
// indented, then "runs", one run per line, each run's result cut to the fields named in KEEP (an array result, such
// as llama-bench's, field by field in each element): what was measured, not what every run shares.
module.exports = (head, runs, keep) => {
  const pick = o => Object.fromEntries(Object.entries(o).filter(([k]) => keep.includes(k)));
  const slim = r => ({...r, result: Array.isArray(r.result) ? r.result.map(pick) : pick(r.result)});
  return JSON.stringify(head, null, 1).replace(/\n}$/, ",\n \"runs\": [\n" +
    runs.map(r => JSON.stringify(slim(r))).join(",\n") + "\n ]\n}");
};
