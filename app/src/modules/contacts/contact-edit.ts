// Editing a contact, as the conversation's contact panel and the contact's own page both do.
import { api, data } from '../../api/client.js';
import type { Contact } from '../../api/types.js';

/** A lifecycle stage, or '' for none. */
export type Stage = '' | 'lead' | 'customer' | 'churned';
export const STAGES: { value: Exclude<Stage, ''>; label: string }[] = [
  { value: 'lead', label: 'Lead' },
  { value: 'customer', label: 'Customer' },
  { value: 'churned', label: 'Churned' },
];

/** The form's values: tags as typed ("vip, late payer"), '' for an empty field. */
export interface ContactEdits {
  /** Only where the form offers it; absent keeps the phone. */
  phone?: string;
  name: string;
  email: string;
  tags: string;
  stage: Stage;
  /** The custom fields as they should be (absent keeps them as they are). */
  customFields?: { key: string; value: string }[];
}

/**
 * Saves the edits: `PUT /v1/contacts/{id}` (an emptied field becomes null; a custom field no
 * longer listed is removed), then the lifecycle stage when it changed (its own route, for its
 * event).
 */
export async function saveContact(contact: Contact, edits: ContactEdits): Promise<void> {
  let custom: Record<string, string | null> | undefined;
  if (edits.customFields) {
    custom = {};
    for (const key of Object.keys(contact.custom_fields)) custom[key] = null;
    for (const f of edits.customFields) if (f.key.trim()) custom[f.key.trim()] = f.value;
  }
  const phone = edits.phone?.trim();
  await data(
    api.PUT('/v1/contacts/{id}', {
      params: { path: { id: contact.id } },
      body: {
        ...(phone ? { phone } : {}),
        name: edits.name.trim() || null,
        email: edits.email.trim() || null,
        tags: edits.tags
          .split(',')
          .map((t) => t.trim())
          .filter(Boolean),
        ...(custom ? { custom_fields: custom } : {}),
      },
    }),
  );
  if (edits.stage !== (contact.lifecycle_stage ?? ''))
    await data(
      api.POST('/v1/contacts/{id}/lifecycle', {
        params: { path: { id: contact.id } },
        body: { lifecycle_stage: edits.stage || null },
      }),
    );
}
