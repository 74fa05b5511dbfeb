import type { TemplateStatus } from '../db/schema.js';
import { ValidationError } from '../errors.js';

/**
 * What an adapter for a provider that keeps its own templates (WhatsApp Cloud) offers the
 * templates feature, and the placeholder rule both read bodies by.
 */

export type TemplateCategory = 'marketing' | 'utility' | 'authentication';

/** A template as the provider holds it, in our vocabulary. */
export interface ProviderTemplate {
  providerTemplateId: string;
  name: string;
  language: string;
  category: TemplateCategory;
  body: string;
  status: TemplateStatus;
  rejectionReason: string | null;
}

/**
 * The templates of a provider that keeps its own (WhatsApp Cloud: the business account's message
 * templates). Implementations translate the vendor's refusals into AppErrors: a refusal of the
 * template is a 422, a temporary fault a 503.
 */
export interface WhatsAppTemplateApi {
  /** Submits a template for the provider's review. */
  submit(template: {
    name: string;
    language: string;
    category: TemplateCategory;
    body: string;
  }): Promise<{ providerTemplateId: string; status: TemplateStatus; category: TemplateCategory }>;
  /**
   * Deletes the template at the provider (that one language of it). One the provider no longer
   * holds counts as deleted.
   */
  remove(template: { name: string; providerTemplateId: string }): Promise<void>;
  /** Every template the provider holds; those we cannot represent are listed with the reason. */
  list(): Promise<{
    templates: ProviderTemplate[];
    skipped: Array<{ name: string; language: string; reason: string }>;
  }>;
}

/** `{{n}}`, as template bodies number their parameters. */
export const PLACEHOLDER = /\{\{\s*(\d+)\s*\}\}/g;

/** How many parameters a body takes; its placeholders must be {{1}}…{{n}} without gaps. */
export function placeholderCount(body: string, field = 'body'): number {
  const seen = new Set<number>();
  for (const m of body.matchAll(PLACEHOLDER)) seen.add(Number(m[1]));
  for (let i = 1; i <= seen.size; i++) {
    if (!seen.has(i))
      throw new ValidationError(
        field,
        `placeholders must be numbered {{1}} to {{${seen.size}}} without gaps`,
      );
  }
  return seen.size;
}
