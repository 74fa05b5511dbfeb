#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { loadConfig } from './config.js';
import { registerAccounts } from './cli/accounts.js';
import { describeError } from './cli/common.js';
import { registerDemo } from './cli/demo.js';
import { registerJobs } from './cli/jobs.js';
import { registerListen } from './cli/listen.js';
import { registerUsers } from './cli/users.js';

// The service's code (main.js, server.js) is imported by the commands that run it or open the
// store: --version, --help, listen, demo and the commands through --url start without it.

// package.json is one level above both src/cli.ts and dist/cli.js.
const { version } = JSON.parse(
  readFileSync(new URL('../package.json', import.meta.url), 'utf8'),
) as { version: string };

const program = new Command('switchboard')
  .description('Switchboard messaging service')
  .version(version, '-V, --version', 'print the version')
  .helpOption('-h, --help', 'show help for a command')
  .helpCommand('help [command]', 'show help for a command');

// Only these three may create a store; every other command refuses an empty one.
program
  .command('serve', { isDefault: true })
  .description('run the HTTP API and the background workers (the default command)')
  .option(
    '--no-workers',
    'run only the HTTP API (scale workers separately with `switchboard worker`)',
  )
  .action(async (opts: { workers: boolean }) => {
    const { serve } = await import('./main.js');
    await serve({ api: true, workers: opts.workers });
  });

program
  .command('worker')
  .description(
    'run only the background workers (needs DATABASE_URL to share a database with the API)',
  )
  .action(async () => {
    const { serve } = await import('./main.js');
    await serve({ api: false, workers: true });
  });

program
  .command('migrate')
  .description('apply pending database migrations and exit')
  .action(async () => {
    const { openStore } = await import('./server.js');
    const store = await openStore(loadConfig());
    await store.close();
    process.stdout.write('migrations applied\n');
  });

// Accounts, keys, invites and dead jobs: on the store, or through a running service (--url).
registerAccounts(program);
registerUsers(program);
registerJobs(program);

registerListen(program);

registerDemo(program);

program.parseAsync().catch((err: unknown) => {
  process.stderr.write(`switchboard: ${describeError(err)}\n`);
  process.exit(1);
});
