import './broadcasts.css';
import { useEffect, useState } from 'preact/hooks';
import { api, data } from '../../api/client.js';
import { keys } from '../../api/keys.js';
import type { Channel, Template } from '../../api/types.js';
import { useQuery } from '../../lib/query.js';
import { navigate, onLinkClick } from '../../lib/router.js';
import { placeholderCount } from '../../lib/template-body.js';
import { TemplateFields } from '../templates/TemplateFields.js';
import { currentSession } from '../session/session.js';
import {
  createBroadcast,
  LIFECYCLE_STAGES,
  previewAudience,
  type Audience,
  type CreateBroadcast,
  type LifecycleStage,
} from './broadcasts-data.js';

const CHANNELS: { value: Channel; label: string }[] = [
  { value: 'whatsapp', label: 'WhatsApp' },
  { value: 'messenger', label: 'Messenger' },
  { value: 'instagram', label: 'Instagram' },
  { value: 'webchat', label: 'Webchat' },
];

/** The audience is counted this long after the last change to it. */
const PREVIEW_DEBOUNCE_MS = 400;

function useDebounced<T>(value: T, ms: number): T {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const timer = setTimeout(() => setSettled(value), ms);
    return () => clearTimeout(timer);
  }, [JSON.stringify(value), ms]);
  return settled;
}

/** The audience the builder describes, or null while it describes none (no tag, no stage). */
function audienceOf(everyone: boolean, tags: string, stage: LifecycleStage | ''): Audience | null {
  if (everyone) return { all: true };
  const list = tags
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  if (list.length === 0 && !stage) return null;
  return { ...(list.length ? { tags: list } : {}), ...(stage ? { lifecycle_stage: stage } : {}) };
}

/** A `datetime-local` value, in the browser's zone, as ISO 8601 with a zone. */
function toIso(local: string): string {
  return new Date(local).toISOString();
}

/** A `datetime-local` value an hour from now (the default time to schedule for). */
function inAnHour(): string {
  const d = new Date(Date.now() + 60 * 60 * 1000);
  d.setSeconds(0, 0);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** A new broadcast (admins): name, channel, audience with its count, message, when. */
export function NewBroadcast() {
  if (currentSession().user.role !== 'admin') {
    return (
      <div class="bc-page">
        <h1 id="page-title">New broadcast</h1>
        <p class="muted">Broadcasts are created by admins.</p>
      </div>
    );
  }
  return <BroadcastForm />;
}

function BroadcastForm() {
  const [name, setName] = useState('');
  const [channel, setChannel] = useState<Channel>('whatsapp');
  const [everyone, setEveryone] = useState(false);
  const [tags, setTags] = useState('');
  const [stage, setStage] = useState<LifecycleStage | ''>('');
  const [kind, setKind] = useState<'text' | 'template'>('template');
  const [content, setContent] = useState('');
  const [templateName, setTemplateName] = useState('');
  const [params, setParams] = useState<string[]>([]);
  const [later, setLater] = useState(false);
  const [sendAt, setSendAt] = useState(inAnHour);
  const [error, setError] = useState<string | null>(null);
  const [saving, setSaving] = useState(false);

  const audience = audienceOf(everyone, tags, stage);
  const settled = useDebounced({ channel, audience }, PREVIEW_DEBOUNCE_MS);
  const settling = JSON.stringify(settled) !== JSON.stringify({ channel, audience });
  const matches = useQuery<number>({
    queryKey: keys.audiencePreview(settled.channel, JSON.stringify(settled.audience)),
    queryFn: ({ signal }) => previewAudience(settled.channel, settled.audience!, signal),
    enabled: settled.audience !== null,
    staleTime: 0,
    retry: false,
  });

  const templates = useQuery<Template[]>({
    queryKey: [...keys.templates(), 'approved'],
    queryFn: async ({ signal }) =>
      (
        await data(api.GET('/v1/templates', { params: { query: { limit: 100 } }, signal }))
      ).data.filter((t) => t.status === 'approved'),
  });
  const approved = templates.data ?? [];
  const template = approved.find((t) => t.name === templateName) ?? approved[0];
  const count = template ? placeholderCount(template.body) : 0;

  const submit = async (event: Event) => {
    event.preventDefault();
    setError(null);
    if (!audience) {
      setError('Choose who receives it: tags, a lifecycle stage, or everyone.');
      return;
    }
    if (kind === 'template' && !template) {
      setError('Choose an approved template, or send a text.');
      return;
    }
    const body: CreateBroadcast = {
      name: name.trim(),
      channel,
      audience,
      message:
        kind === 'text'
          ? { type: 'text', content }
          : {
              type: 'template',
              template_name: template!.name,
              template_params: Array.from({ length: count }, (_, i) => params[i] ?? ''),
            },
      ...(later ? { scheduled_at: toIso(sendAt) } : {}),
    };
    setSaving(true);
    try {
      const created = await createBroadcast(body);
      navigate(`/broadcasts/${created.id}`);
    } catch (err) {
      setError(err instanceof Error ? err.message : 'The broadcast was not created.');
    } finally {
      setSaving(false);
    }
  };

  let matchText: string;
  if (!audience) matchText = 'Choose tags, a lifecycle stage, or everyone.';
  else if (settling || matches.isFetching) matchText = 'Counting contacts…';
  else if (matches.error) matchText = matches.error.message;
  else if (matches.data !== undefined)
    matchText = `${matches.data.toLocaleString()} ${matches.data === 1 ? 'contact matches' : 'contacts match'}`;
  else matchText = 'Counting contacts…';

  return (
    <div class="bc-page">
      <a class="bc-back" href="/app/broadcasts" onClick={onLinkClick('/broadcasts')}>
        ← All broadcasts
      </a>
      <h1 id="page-title">New broadcast</h1>
      <form class="bc-form stack" onSubmit={(e) => void submit(e)}>
        <label class="field">
          <span>Name</span>
          <input
            required
            maxLength={200}
            value={name}
            onInput={(e) => setName(e.currentTarget.value)}
          />
        </label>
        <label class="field">
          <span>Channel</span>
          <select value={channel} onChange={(e) => setChannel(e.currentTarget.value as Channel)}>
            {CHANNELS.map((c) => (
              <option key={c.value} value={c.value}>
                {c.label}
              </option>
            ))}
          </select>
        </label>

        <fieldset class="bc-fieldset">
          <legend>Audience</legend>
          <label class="radio">
            <input
              type="radio"
              name="audience-kind"
              checked={!everyone}
              onChange={() => setEveryone(false)}
            />
            Contacts with tags or a lifecycle stage
          </label>
          <label class="radio">
            <input
              type="radio"
              name="audience-kind"
              checked={everyone}
              onChange={() => setEveryone(true)}
            />
            Every contact
          </label>
          {!everyone && (
            <div class="bc-row">
              <label class="field">
                <span>Tags</span>
                <input
                  value={tags}
                  aria-describedby="tags-hint"
                  onInput={(e) => setTags(e.currentTarget.value)}
                />
                <span class="hint" id="tags-hint">
                  Separated by commas; a contact with any of them matches.
                </span>
              </label>
              <label class="field">
                <span>Lifecycle stage</span>
                <select
                  value={stage}
                  onChange={(e) => setStage(e.currentTarget.value as LifecycleStage | '')}
                >
                  <option value="">Any stage</option>
                  {LIFECYCLE_STAGES.map((s) => (
                    <option key={s} value={s}>
                      {s}
                    </option>
                  ))}
                </select>
              </label>
            </div>
          )}
          <p class="bc-matches" role="status" aria-label="Matching contacts">
            {matchText}
          </p>
        </fieldset>

        <fieldset class="bc-fieldset">
          <legend>Message</legend>
          <label class="radio">
            <input
              type="radio"
              name="message-kind"
              checked={kind === 'template'}
              onChange={() => setKind('template')}
            />
            Approved template
          </label>
          <label class="radio">
            <input
              type="radio"
              name="message-kind"
              checked={kind === 'text'}
              onChange={() => setKind('text')}
            />
            Text (reaches only contacts who wrote in the last 24 hours on WhatsApp, Messenger and
            Instagram)
          </label>
          {kind === 'text' ? (
            <label class="field">
              <span>Text</span>
              <textarea
                required
                rows={4}
                maxLength={4096}
                value={content}
                onInput={(e) => setContent(e.currentTarget.value)}
              />
            </label>
          ) : templates.isPending ? (
            <p class="muted">Loading templates…</p>
          ) : approved.length === 0 ? (
            <p class="muted">
              No approved template yet: create one under{' '}
              <a href="/app/settings/templates" onClick={onLinkClick('/settings/templates')}>
                Settings › Templates
              </a>
              .
            </p>
          ) : (
            <>
              <TemplateFields
                templates={approved}
                template={template}
                params={params}
                onTemplate={setTemplateName}
                onParams={setParams}
              />
            </>
          )}
        </fieldset>

        <fieldset class="bc-fieldset">
          <legend>When</legend>
          <label class="radio">
            <input type="radio" name="when" checked={!later} onChange={() => setLater(false)} />
            Send now
          </label>
          <label class="radio">
            <input type="radio" name="when" checked={later} onChange={() => setLater(true)} />
            Schedule for later
          </label>
          {later && (
            <label class="field">
              <span>Send at</span>
              <input
                type="datetime-local"
                required
                value={sendAt}
                onInput={(e) => setSendAt(e.currentTarget.value)}
              />
              <span class="hint">At least 5 minutes from now, in your time zone.</span>
            </label>
          )}
        </fieldset>

        {error && (
          <p role="alert" class="alert">
            {error}
          </p>
        )}
        <div class="form-actions">
          <button type="submit" class="button primary" disabled={saving}>
            {later ? 'Schedule broadcast' : 'Send broadcast'}
          </button>
        </div>
      </form>
    </div>
  );
}
