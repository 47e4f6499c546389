// The text of a bench result file, shared by bench/peer.sh and bench/kernel_sets.sh: HEAD (what, machine, table, ...)
// indented, each innermost object (one whose values are numbers, strings or arrays of them: a median and its
// values) on one line; then "commands", the distinct command lines of the runs once each, and "runs", one run per
// line, its "command" the index of its line in "commands" and its result cut to the fields named in KEEP (an array
// result, such as llama-bench's, field by field in each element): what was measured, not what every run shares.
const scalar = v => v === null || typeof v !== "object";
const flat = v => scalar(v) || (Array.isArray(v) && v.every(scalar));
const line = v => scalar(v) ? JSON.stringify(v) : Array.isArray(v) ? "[" + v.map(line).join(", ") + "]"
  : "{" + Object.entries(v).map(([k, x]) => JSON.stringify(k) + ": " + line(x)).join(", ") + "}";
const text = (v, pad) => {
  if (flat(v) || Object.values(v).every(flat)) return line(v);
  const inner = pad + " ";
  return "{\n" + Object.entries(v).map(([k, x]) => inner + JSON.stringify(k) + ": " + text(x, inner)).join(",\n") + "\n" + pad + "}";
};
module.exports = (head, runs, keep) => {
  const pick = o => Object.fromEntries(Object.entries(o).filter(([k]) => keep.includes(k)));
  const commands = [...new Set(runs.map(r => r.command).filter(c => typeof c === "string"))];
  const slim = r => ({...r, ...(typeof r.command === "string" ? {command: commands.indexOf(r.command)} : {}),
                      result: Array.isArray(r.result) ? r.result.map(pick) : pick(r.result)});
  const list = (name, xs) => ",\n \"" + name + "\": [\n  " + xs.map(x => JSON.stringify(x)).join(",\n  ") + "\n ]";
  return text(head, "").replace(/\n}$/, list("commands", commands) + list("runs", runs.map(slim)) + "\n}");
};
