import type { Clock } from '../clock.js';
import { isUniqueViolation } from '../db/errors.js';
import type { Scope } from '../db/transactor.js';
import { Conflict, NotFound } from '../errors.js';
import type { PageRequest, PageResult } from '../http/pagination.js';
import { newId } from '../ids.js';
import type {
  CannedResponseRow,
  CannedResponsesRepository,
} from './canned-responses.repository.js';
import type {
  CannedResponse,
  CreateCannedResponseBody,
  UpdateCannedResponseBody,
} from './canned-responses.schema.js';

const toCannedResponse = (r: CannedResponseRow): CannedResponse => ({
  id: r.id,
  shortcut: r.shortcut,
  content: r.content,
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
});

/** The answers agents insert by shortcut; a shortcut is the account's once. */
export class CannedResponsesService {
  constructor(
    private readonly deps: { cannedResponses: CannedResponsesRepository; clock: Clock },
  ) {}

  async create(scope: Scope, body: CreateCannedResponseBody): Promise<CannedResponse> {
    const now = this.deps.clock.now();
    const row: CannedResponseRow = {
      account_id: scope.accountId,
      id: newId('cr'),
      shortcut: body.shortcut,
      content: body.content,
      created_at: now,
      updated_at: now,
    };
    await this.taken(body.shortcut, () => this.deps.cannedResponses.insert(row));
    return toCannedResponse(row);
  }

  async get(scope: Scope, id: string): Promise<CannedResponse> {
    const row = await this.deps.cannedResponses.find(scope.accountId, id);
    if (!row) throw new NotFound('canned response', id);
    return toCannedResponse(row);
  }

  async list(
    scope: Scope,
    q: string | undefined,
    page: PageRequest,
  ): Promise<PageResult<CannedResponse>> {
    const { rows, total } = await this.deps.cannedResponses.list(scope.accountId, q ?? null, page);
    return { data: rows.map(toCannedResponse), total, page: page.page };
  }

  async update(scope: Scope, id: string, body: UpdateCannedResponseBody): Promise<CannedResponse> {
    const row = await this.taken(body.shortcut, () =>
      this.deps.cannedResponses.update(scope.accountId, id, body, this.deps.clock.now()),
    );
    if (!row) throw new NotFound('canned response', id);
    return toCannedResponse(row);
  }

  async delete(scope: Scope, id: string): Promise<{ success: true }> {
    if (!(await this.deps.cannedResponses.delete(scope.accountId, id)))
      throw new NotFound('canned response', id);
    return { success: true };
  }

  /** A write that may take a shortcut another canned response holds: that is a 409. */
  private async taken<T>(shortcut: string | undefined, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (err) {
      if (isUniqueViolation(err, 'canned_responses_shortcut'))
        throw new Conflict(`the shortcut ${shortcut} is taken by another canned response`);
      throw err;
    }
  }
}
