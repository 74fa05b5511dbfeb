import { useState } from 'preact/hooks';
import { useAction } from '../../../lib/query.js';
import { Dialog } from '../../../ui/Dialog.js';
import { CopyButton, CopyField } from '../../../ui/Copy.js';
import { fieldErrors } from '../../../api/errors.js';
import { ChannelCard } from './ChannelCard.js';
import { connect, type Connection } from './channels-data.js';
import { WidgetPreview } from './WidgetPreview.js';

interface WebchatSettings {
  widget_key?: string;
  widget_url?: string;
  allowed_origins?: string[];
  identity_verification?: 'off' | 'required';
  title?: string;
  greeting?: string | null;
  color?: string;
}

const DEFAULT_TITLE = 'Chat with us';
const DEFAULT_COLOR = '#2563eb';

/** The one script tag a site embeds. */
export function embedSnippet(s: WebchatSettings): string {
  return `<script src="${s.widget_url}" data-widget-key="${s.widget_key}" async></script>`;
}

/** Website chat: its settings with a live preview, the embed snippet, the identity secret. */
export function WebchatChannel({ connection }: { connection: Connection }) {
  const settings = connection.settings as WebchatSettings;
  const real = connection.provider === 'webchat' && connection.id !== null;
  const [secret, setSecret] = useState<string | null>(null);
  const rotate = useAction(async () => {
    const c = await connect('webchat', {
      provider: 'webchat',
      allowed_origins: settings.allowed_origins ?? [],
      identity_verification: settings.identity_verification ?? 'off',
      title: settings.title ?? DEFAULT_TITLE,
      ...(settings.greeting ? { greeting: settings.greeting } : {}),
      color: settings.color ?? DEFAULT_COLOR,
      rotate_identity_secret: true,
    });
    setSecret(c.identity_secret ?? null);
  });
  return (
    <ChannelCard connection={connection}>
      <WebchatForm
        key={connection.updated_at ?? 'new'}
        settings={settings}
        real={real}
        onSecret={setSecret}
      />
      {real && settings.widget_key && settings.widget_url && (
        <div class="stack">
          <h3>Embed the widget</h3>
          <p class="hint">
            Paste this before <code>&lt;/body&gt;</code> on every page of the allowed sites.
          </p>
          <CopyField label="Embed snippet" value={embedSnippet(settings)} multiline />
          <h3>Identity verification</h3>
          <p class="hint">
            Your server signs each visitor's identifier with the identity secret (HMAC-SHA256); the
            secret is shown only when it is made. A new one stops the old one at once.
          </p>
          <div class="form-actions">
            <button
              type="button"
              class="button ghost"
              disabled={rotate.pending}
              onClick={() => void rotate.run()}
            >
              Rotate identity secret
            </button>
          </div>
          {rotate.error && <p role="alert">{rotate.error.message}</p>}
        </div>
      )}
      {secret && (
        <Dialog title="Identity secret" onClose={() => setSecret(null)}>
          <div class="stack">
            <p>Keep it on your server: it is shown only now.</p>
            <label class="field">
              <span>Identity secret</span>
              <input type="text" readOnly class="mono" value={secret} />
            </label>
            <CopyButton text={secret} label="Copy identity secret" />
            <div class="dialog-actions">
              <button type="button" class="button primary" onClick={() => setSecret(null)}>
                Done
              </button>
            </div>
          </div>
        </Dialog>
      )}
    </ChannelCard>
  );
}

function WebchatForm(props: {
  settings: WebchatSettings;
  real: boolean;
  onSecret: (secret: string) => void;
}) {
  const s = props.settings;
  const [origins, setOrigins] = useState((s.allowed_origins ?? []).join('\n'));
  const [verification, setVerification] = useState<'off' | 'required'>(
    s.identity_verification ?? 'off',
  );
  const [title, setTitle] = useState(s.title ?? DEFAULT_TITLE);
  const [greeting, setGreeting] = useState(s.greeting ?? '');
  const [color, setColor] = useState(s.color ?? DEFAULT_COLOR);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [saving, setSaving] = useState(false);
  const [said, setSaid] = useState('');
  const submit = async (e: Event) => {
    e.preventDefault();
    setSaving(true);
    setErrors({});
    setSaid('');
    try {
      const c = await connect('webchat', {
        provider: 'webchat',
        allowed_origins: origins
          .split(/[\n,]/)
          .map((o) => o.trim())
          .filter(Boolean),
        identity_verification: verification,
        ...(title.trim() ? { title: title.trim() } : {}),
        ...(greeting.trim() ? { greeting: greeting.trim() } : {}),
        color,
      });
      if (c.identity_secret) props.onSecret(c.identity_secret);
      setSaid('Website chat saved.');
    } catch (err) {
      setErrors(fieldErrors(err));
    } finally {
      setSaving(false);
    }
  };
  const errorOf = (field: string) =>
    Object.entries(errors)
      .filter(([f]) => f === field || f.startsWith(`${field}.`) || f.startsWith(`${field}[`))
      .map(([, issue]) => issue)
      .join('; ');
  const known = ['allowed_origins', 'identity_verification', 'title', 'greeting', 'color'];
  const other = Object.entries(errors).filter(([f]) => !known.some((k) => f.startsWith(k)));
  const field = (name: string, lbl: string, input: preact.JSX.Element) => {
    const error = errorOf(name);
    return (
      <div class="field">
        <label for={`webchat-${name}`}>{lbl}</label>
        {input}
        {error && (
          <span id={`webchat-${name}-error`} class="error-text">
            {error}
          </span>
        )}
      </div>
    );
  };
  const described = (name: string) =>
    errorOf(name) ? { 'aria-invalid': true, 'aria-describedby': `webchat-${name}-error` } : {};
  return (
    <div class="webchat-grid">
      <form class="stack" aria-label="Website chat settings" onSubmit={(e) => void submit(e)}>
        {field(
          'allowed_origins',
          'Allowed origins (one a line)',
          <textarea
            id="webchat-allowed_origins"
            rows={3}
            placeholder="https://shop.example"
            value={origins}
            {...described('allowed_origins')}
            onInput={(e) => setOrigins(e.currentTarget.value)}
          />,
        )}
        {field(
          'identity_verification',
          'Identity verification',
          <select
            id="webchat-identity_verification"
            value={verification}
            {...described('identity_verification')}
            onChange={(e) => setVerification(e.currentTarget.value as 'off' | 'required')}
          >
            <option value="off">Off: anyone on the site may chat</option>
            <option value="required">Required: only visitors your server identifies</option>
          </select>,
        )}
        {field(
          'title',
          'Title',
          <input
            id="webchat-title"
            type="text"
            maxLength={200}
            value={title}
            {...described('title')}
            onInput={(e) => setTitle(e.currentTarget.value)}
          />,
        )}
        {field(
          'greeting',
          'Greeting',
          <textarea
            id="webchat-greeting"
            rows={2}
            maxLength={1000}
            value={greeting}
            {...described('greeting')}
            onInput={(e) => setGreeting(e.currentTarget.value)}
          />,
        )}
        {field(
          'color',
          'Colour',
          <input
            id="webchat-color"
            type="color"
            value={color}
            {...described('color')}
            onInput={(e) => setColor(e.currentTarget.value)}
          />,
        )}
        {other.length > 0 && (
          <p role="alert">{other.map(([f, issue]) => (f ? `${f}: ${issue}` : issue)).join('; ')}</p>
        )}
        <div class="form-actions">
          <button type="submit" class="button primary" disabled={saving}>
            {props.real ? 'Save website chat' : 'Connect website chat'}
          </button>
          <span role="status" class="hint">
            {said}
          </span>
        </div>
      </form>
      <WidgetPreview
        title={title.trim() || DEFAULT_TITLE}
        greeting={greeting.trim()}
        color={color}
      />
    </div>
  );
}
