import type { Command } from 'commander';
import type { UserRole } from '../db/schema.js';
import { json, print, remote, role, type Remote } from './common.js';
import { withOperator } from './operator.js';

/** `switchboard users …`. */
export function registerUsers(program: Command): void {
  const users = program.command('users').description('people who sign in to the inbox');

  remote(json(users.command('invite')))
    .description(
      'print an invite link (7 days, one use) for a user of the account: a new user, or a new link for the one with that email',
    )
    .requiredOption('--account <id>', 'account id (acc_…)')
    .requiredOption('--email <email>', "the user's email")
    .option('--role <role>', 'admin or agent', role, 'agent')
    .option('--name <name>', "the user's name (else they give it when accepting)")
    .action(
      (
        opts: Remote & {
          account: string;
          email: string;
          role: UserRole;
          name?: string;
          json?: boolean;
        },
      ) =>
        withOperator(opts, async (op) => {
          const invite = await op.invite(opts.account, {
            email: opts.email,
            role: opts.role,
            ...(opts.name !== undefined && { name: opts.name }),
          });
          print(
            !!opts.json,
            invite,
            `invite for ${opts.email} (${invite.user_id}, ${opts.role}), valid until ${invite.expires_at}:\n  ${invite.invite_url}`,
          );
        }),
    );
}
