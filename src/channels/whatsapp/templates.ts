import type { TemplateStatus } from '../../db/schema.js';
import { AppError, Unavailable } from '../../errors.js';
import {
  placeholderCount,
  type ProviderTemplate,
  type TemplateCategory,
  type WhatsAppTemplateApi,
} from '../provider-templates.js';
import { GraphError, classifyGraphError, type GraphClient } from '../meta/graph-client.js';

/** One entry of `GET /{waba_id}/message_templates` (Meta's fields, only those we read). */
interface MetaTemplate {
  id?: unknown;
  name?: unknown;
  language?: unknown;
  status?: unknown;
  category?: unknown;
  parameter_format?: unknown;
  rejected_reason?: unknown;
  components?: Array<{ type?: unknown; text?: unknown }>;
}

interface MetaTemplatePage {
  data?: MetaTemplate[];
  paging?: { cursors?: { after?: unknown }; next?: unknown };
}

const CATEGORIES: ReadonlySet<string> = new Set(['marketing', 'utility', 'authentication']);
const PAGE_SIZE = 100;
/** A guard against a paging loop: 100 pages of 100 is more than Meta lets an account hold. */
const MAX_PAGES = 100;

/** Meta's template status (in lists and create answers) in our words. */
export function templateStatusOf(meta: unknown): TemplateStatus {
  if (meta === 'APPROVED') return 'approved';
  if (meta === 'REJECTED') return 'rejected';
  return 'pending';
}

/**
 * The `event` of a `message_template_status_update` webhook in our words, or null for events
 * that do not change what we can do with the template (flagged, paused and the like: a send
 * then fails with Meta's own code).
 */
export function templateStatusOfEvent(event: string): TemplateStatus | null {
  switch (event) {
    case 'APPROVED':
    case 'REINSTATED':
      return 'approved';
    case 'REJECTED':
    case 'DISABLED':
      return 'rejected';
    case 'PENDING':
    case 'IN_APPEAL':
      return 'pending';
    default:
      return null;
  }
}

/** Meta writes "NONE" when there is no reason. */
export function templateReasonOf(reason: unknown): string | null {
  return typeof reason === 'string' && reason !== '' && reason !== 'NONE' ? reason : null;
}

function categoryOf(meta: unknown): TemplateCategory {
  const c = typeof meta === 'string' ? meta.toLowerCase() : '';
  return CATEGORIES.has(c) ? (c as TemplateCategory) : 'utility';
}

/** Our AppError for Graph's refusal: the template's fault is a 422, Meta's a 503. */
function refusal(err: GraphError, doing: string): AppError {
  if (classifyGraphError(err) === 'final')
    return new AppError('validation_error', `WhatsApp refused ${doing}: ${err.describe()}`, 422, [
      { field: 'template', issue: err.describe() },
    ]);
  const seconds = err.retryAfterMs === null ? undefined : Math.ceil(err.retryAfterMs / 1000);
  return new Unavailable(`WhatsApp could not be reached for ${doing}: ${err.describe()}`, seconds);
}

/** The message templates of one WhatsApp Business Account, through Graph. */
export class WhatsAppTemplates implements WhatsAppTemplateApi {
  constructor(
    private readonly opts: { graph: GraphClient; businessAccountId: string; accessToken: string },
  ) {}

  private get path(): string {
    return `${encodeURIComponent(this.opts.businessAccountId)}/message_templates`;
  }

  async submit(t: { name: string; language: string; category: TemplateCategory; body: string }) {
    const count = placeholderCount(t.body);
    const body: Record<string, unknown> = { type: 'BODY', text: t.body };
    // Meta reviews a template with placeholders only with a sample value for each.
    if (count > 0)
      body.example = { body_text: [Array.from({ length: count }, (_, i) => `sample ${i + 1}`)] };
    let answer: { id?: unknown; status?: unknown; category?: unknown };
    try {
      answer = await this.opts.graph.call('POST', this.path, {
        token: this.opts.accessToken,
        json: {
          name: t.name,
          language: t.language,
          category: t.category.toUpperCase(),
          components: [body],
        },
      });
    } catch (err) {
      if (err instanceof GraphError) throw refusal(err, `the template ${t.name}`);
      throw err;
    }
    if (typeof answer.id !== 'string' || answer.id === '')
      throw new Unavailable('WhatsApp answered the template submission without an id');
    return {
      providerTemplateId: answer.id,
      status: templateStatusOf(answer.status),
      category: answer.category === undefined ? t.category : categoryOf(answer.category),
    };
  }

  async remove(t: { name: string; providerTemplateId: string }): Promise<void> {
    try {
      // With hsm_id, only this language of the name goes (by name alone, every language would).
      await this.opts.graph.call('DELETE', this.path, {
        token: this.opts.accessToken,
        query: { hsm_id: t.providerTemplateId, name: t.name },
      });
    } catch (err) {
      if (!(err instanceof GraphError)) throw err;
      // Meta answers an invalid parameter (#100) for a template it does not hold (deleted in
      // WhatsApp Manager already): what was asked for is so.
      if (err.code === 100) return;
      throw refusal(err, `deleting the template ${t.name}`);
    }
  }

  async list() {
    const templates: ProviderTemplate[] = [];
    const skipped: Array<{ name: string; language: string; reason: string }> = [];
    let after: string | null = null;
    for (let page = 0; page < MAX_PAGES; page++) {
      const query: Record<string, string> = {
        fields: 'id,name,language,status,category,parameter_format,rejected_reason,components',
        limit: String(PAGE_SIZE),
      };
      if (after) query.after = after;
      let answer: MetaTemplatePage;
      try {
        answer = await this.opts.graph.call<MetaTemplatePage>('GET', this.path, {
          token: this.opts.accessToken,
          query,
        });
      } catch (err) {
        if (err instanceof GraphError) throw refusal(err, 'the template list');
        throw err;
      }
      for (const t of answer.data ?? []) {
        const converted = convert(t);
        if ('reason' in converted) skipped.push(converted);
        else templates.push(converted);
      }
      // `paging.next` says there is more; we follow its cursor on our own base URL rather than
      // the URL itself, so the token only ever goes to META_GRAPH_URL.
      const cursor = answer.paging?.cursors?.after;
      if (typeof answer.paging?.next !== 'string' || typeof cursor !== 'string' || cursor === '')
        break;
      after = cursor;
    }
    return { templates, skipped };
  }
}

function convert(
  t: MetaTemplate,
): ProviderTemplate | { name: string; language: string; reason: string } {
  const name = typeof t.name === 'string' ? t.name : '';
  const language = typeof t.language === 'string' ? t.language : '';
  const skip = (reason: string) => ({ name, language, reason });
  if (typeof t.id !== 'string' || !/^[a-z0-9_]{1,512}$/.test(name) || language === '')
    return skip('not a template we can read (id, name or language missing)');
  if (t.parameter_format === 'NAMED') return skip('named parameters are not supported');
  const bodyText = t.components?.find((c) => c.type === 'BODY')?.text;
  if (typeof bodyText !== 'string' || bodyText === '') return skip('it has no body text');
  try {
    placeholderCount(bodyText);
  } catch {
    return skip('its placeholders are not numbered {{1}} to {{n}}');
  }
  const status = templateStatusOf(t.status);
  return {
    providerTemplateId: t.id,
    name,
    language,
    category: categoryOf(t.category),
    body: bodyText,
    status,
    rejectionReason: status === 'rejected' ? templateReasonOf(t.rejected_reason) : null,
  };
}
