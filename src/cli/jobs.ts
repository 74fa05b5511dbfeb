import type { Command } from 'commander';
import type { DeadJob } from '../jobs/dead-jobs.js';
import { json, print, remote, upTo, type Remote } from './common.js';
import { withOperator } from './operator.js';

function describeDeadJob(j: DeadJob): string {
  // One line per job; an error is cut to its first line so the list stays a list.
  const error = (j.last_error ?? '').split('\n')[0]!;
  return `${j.id}  ${j.account_id}  ${j.kind}  attempts ${j.attempts}  died ${j.died_at}  ${error}`;
}

/** `switchboard jobs …`. */
export function registerJobs(program: Command): void {
  const jobs = program.command('jobs').description('inspect and retry background jobs');

  remote(json(jobs.command('dead')))
    .description('list jobs whose retries ran out, newest first, with their last error')
    .option('--account <id>', "only this account's (acc_…)")
    .option('--limit <n>', 'at most this many, up to 1000 (default 100)', upTo(1000))
    .action((opts: Remote & { account?: string; limit?: number; json?: boolean }) =>
      withOperator(opts, async (op) => {
        const list = await op.deadJobs({ accountId: opts.account, limit: opts.limit ?? 100 });
        print(
          !!opts.json,
          list,
          list.length === 0 ? 'no dead jobs' : list.map(describeDeadJob).join('\n'),
        );
      }),
    );

  remote(json(jobs.command('retry')))
    .description('put a dead job back in the queue, due now, with a fresh retry schedule')
    .argument('<id>', 'job id (job_…)')
    .action((id: string, opts: Remote & { json?: boolean }) =>
      withOperator(opts, async (op) => {
        const job = await op.retryJob(id);
        print(!!opts.json, job, `queued ${job.id} (${job.kind}) again`);
      }),
    );
}
