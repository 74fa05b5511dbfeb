import { InvalidArgumentError, type Command } from 'commander';
import { ConfigError } from '../config.js';
import type { Plan, UserRole } from '../db/schema.js';
import { AppError, EmptyStore } from '../errors.js';

/** A refusal of the command line's own, printed as it is in one line. */
export class CliError extends Error {}

export function plan(value: string): Plan {
  if (value !== 'starter' && value !== 'growth' && value !== 'enterprise') {
    throw new InvalidArgumentError('must be starter, growth or enterprise');
  }
  return value;
}

export function role(value: string): UserRole {
  if (value !== 'admin' && value !== 'agent')
    throw new InvalidArgumentError('must be admin or agent');
  return value;
}

export function positiveInt(value: string): number {
  if (!/^[1-9]\d{0,6}$/.test(value))
    throw new InvalidArgumentError('must be a whole number from 1');
  return Number(value);
}

/** A whole number from 1 to `max` (the admin API's bound for the same figure). */
export function upTo(max: number): (value: string) => number {
  return (value) => {
    const n = positiveInt(value);
    if (n > max) throw new InvalidArgumentError(`must be a whole number from 1 to ${max}`);
    return n;
  };
}

// Commander stores a parser's null as '', so the plan's figure travels as 'plan'.
export function rateLimitOrPlan(value: string): number | 'plan' {
  return value === 'plan' ? 'plan' : positiveInt(value);
}

function serviceUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidArgumentError('must be the URL of the service, e.g. http://127.0.0.1:3000');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new InvalidArgumentError('must be an http:// or https:// URL');
  return value;
}

/** The options of a command that works on the store, or through a running service's admin API. */
export interface Remote {
  /** Set by `--url` or `--api-url` (one option under two names). */
  apiUrl?: string;
}

export function remote(command: Command): Command {
  return command.option(
    '--url, --api-url <url>',
    'work through the running service at this URL (its admin API, with ADMIN_TOKEN from the environment) instead of opening the store',
    serviceUrl,
  );
}

export function json(command: Command): Command {
  return command.option('--json', 'print JSON instead of text');
}

export function print(json: boolean, value: unknown, text: string): void {
  process.stdout.write(json ? `${JSON.stringify(value, null, 2)}\n` : `${text}\n`);
}

/** What a failed command prints after `switchboard: `, one line where it can be. */
export function describeError(err: unknown): string {
  if (err instanceof ConfigError) return `configuration error: ${err.message}`;
  if (err instanceof AppError || err instanceof CliError || err instanceof EmptyStore)
    return err.message;
  if (err instanceof Error && /is in use by another Switchboard process/.test(err.message))
    return `${err.message}: while the service runs, pass --url (with ADMIN_TOKEN) to work through it`;
  return String(err);
}
