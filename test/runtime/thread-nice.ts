import { readdirSync, readFileSync } from 'node:fs';

/** Each thread of process `pid` with its nice value (Linux: /proc/PID/task/TID/stat, field 19). */
export function threadNice(pid: number | 'self'): Map<number, number> {
  const nice = new Map<number, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    // The fields after the command's closing parenthesis; nice is the 19th field of the line.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    nice.set(Number(tid), Number(fields[16]));
  }
  return nice;
}
