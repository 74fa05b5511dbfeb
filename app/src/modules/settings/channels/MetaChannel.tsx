import { useState } from 'preact/hooks';
import { CopyField } from '../../../ui/Copy.js';
import { fieldErrors } from '../../../api/errors.js';
import { ChannelCard } from './ChannelCard.js';
import { CHANNEL_LABELS, connect, type ConnectBody, type Connection } from './channels-data.js';

interface FieldSpec {
  name: string;
  label: string;
  secret?: boolean;
}

/** What PUT /v1/channels/{channel} takes for each Meta channel (the secrets are write-only). */
const FIELDS: Record<'whatsapp' | 'messenger' | 'instagram', FieldSpec[]> = {
  whatsapp: [
    { name: 'phone_number_id', label: 'Phone number ID' },
    { name: 'business_account_id', label: 'WhatsApp Business Account ID' },
    { name: 'access_token', label: 'Access token', secret: true },
    { name: 'app_secret', label: 'App secret', secret: true },
  ],
  messenger: [
    { name: 'page_id', label: 'Page ID' },
    { name: 'page_access_token', label: 'Page access token', secret: true },
    { name: 'app_secret', label: 'App secret', secret: true },
  ],
  instagram: [
    { name: 'page_id', label: 'Page ID' },
    { name: 'instagram_account_id', label: 'Instagram account ID' },
    { name: 'page_access_token', label: 'Page access token', secret: true },
    { name: 'app_secret', label: 'App secret', secret: true },
  ],
};

const PROVIDER = { whatsapp: 'whatsapp_cloud', messenger: 'messenger', instagram: 'instagram' };

/** What Graph told us about the connection, worth showing. */
const FACTS: [string, string][] = [
  ['display_phone_number', 'Phone number'],
  ['verified_name', 'Verified name'],
  ['page_name', 'Page'],
  ['name', 'Name'],
  ['phone_number_id', 'Phone number ID'],
  ['page_id', 'Page ID'],
  ['instagram_account_id', 'Instagram account ID'],
];

/** WhatsApp, Messenger or Instagram: state, what to paste into Meta's dashboard, credentials. */
export function MetaChannel({ connection }: { connection: Connection }) {
  const channel = connection.channel as keyof typeof FIELDS;
  const label = CHANNEL_LABELS[channel];
  const real = connection.id !== null;
  const [editing, setEditing] = useState(false);
  const settings = connection.settings as Record<string, unknown>;
  const facts = FACTS.filter(([k]) => typeof settings[k] === 'string');
  return (
    <ChannelCard connection={connection}>
      {real && facts.length > 0 && (
        <dl class="facts">
          {facts.map(([k, name]) => (
            <div key={k}>
              <dt>{name}</dt>
              <dd>{String(settings[k])}</dd>
            </div>
          ))}
        </dl>
      )}
      {real && connection.webhook_url && connection.verify_token && (
        <div class="stack paste">
          <p class="hint">Paste these into the webhook settings of your app in Meta's dashboard.</p>
          <CopyField label="Callback URL" value={connection.webhook_url} />
          <CopyField label="Verify token" value={connection.verify_token} />
        </div>
      )}
      {editing ? (
        <MetaForm
          connection={connection}
          onDone={() => setEditing(false)}
          onCancel={() => setEditing(false)}
        />
      ) : (
        <div class="form-actions">
          <button type="button" class="button" onClick={() => setEditing(true)}>
            {real ? `Change ${label} credentials` : `Connect ${label}`}
          </button>
        </div>
      )}
    </ChannelCard>
  );
}

function MetaForm(props: { connection: Connection; onDone: () => void; onCancel: () => void }) {
  const channel = props.connection.channel as keyof typeof FIELDS;
  const fields = FIELDS[channel];
  const settings = props.connection.settings as Record<string, unknown>;
  const [values, setValues] = useState<Record<string, string>>(() =>
    Object.fromEntries(
      fields.map((f) => {
        const kept = settings[f.name];
        return [f.name, !f.secret && typeof kept === 'string' ? kept : ''];
      }),
    ),
  );
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [saving, setSaving] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setSaving(true);
    setErrors({});
    try {
      const body = { provider: PROVIDER[channel], ...values } as ConnectBody;
      await connect(channel, body);
      props.onDone();
    } catch (err) {
      setErrors(fieldErrors(err));
    } finally {
      setSaving(false);
    }
  };
  const label = CHANNEL_LABELS[channel];
  const unplaced = Object.entries(errors).filter(([f]) => !fields.some((s) => s.name === f));
  return (
    <form class="stack" aria-label={`Connect ${label}`} onSubmit={(e) => void submit(e)}>
      {fields.map((f) => {
        const id = `${channel}-${f.name}`;
        const error = errors[f.name];
        const common = {
          id,
          required: true,
          value: values[f.name],
          'aria-invalid': error ? true : undefined,
          'aria-describedby': error ? `${id}-error` : undefined,
          onInput: (e: Event) =>
            setValues({ ...values, [f.name]: (e.currentTarget as HTMLInputElement).value }),
        };
        return (
          <div class="field" key={f.name}>
            <label for={id}>{f.label}</label>
            {f.secret ? (
              <input type="password" autoComplete="off" {...common} />
            ) : (
              <input type="text" inputMode="numeric" autoComplete="off" {...common} />
            )}
            {error && (
              <span id={`${id}-error`} class="error-text">
                {error}
              </span>
            )}
          </div>
        );
      })}
      {unplaced.length > 0 && (
        <p role="alert">
          {unplaced.map(([f, issue]) => (f ? `${f}: ${issue}` : issue)).join('; ')}
        </p>
      )}
      <p class="hint">
        The credentials are checked with Meta before they are kept; secrets are never shown again.
      </p>
      <div class="form-actions">
        <button type="submit" class="button primary" disabled={saving}>
          {saving ? 'Checking with Meta…' : `Save ${label} connection`}
        </button>
        <button type="button" class="button ghost" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
