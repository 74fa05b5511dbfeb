import { randomBytes } from 'node:crypto';
import { AppError, type ErrorDetail } from '../errors.js';

/** What a webchat connection keeps in its (public) settings. */
export interface WebchatSettings {
  widget_key: string;
  allowed_origins: string[];
  identity_verification: 'off' | 'required';
  title: string;
  greeting: string | null;
  color: string;
  /** The script a site embeds, `{PUBLIC_URL}/widget.js`. */
  widget_url: string;
}

export interface WebchatConnectInput {
  allowed_origins: string[];
  identity_verification: 'off' | 'required';
  title?: string;
  greeting?: string;
  color?: string;
  rotate_identity_secret?: boolean;
}

export const DEFAULT_TITLE = 'Chat with us';
export const DEFAULT_COLOR = '#2563eb';
const COLOR = /^#[0-9a-fA-F]{6}$/;

/**
 * A widget key names its account, so that a visitor request finds its connection by primary
 * key: `wk_<account ulid>_<random>`. It is public (it sits in the site's HTML); the random part
 * only makes it unguessable from the account id.
 */
export function newWidgetKey(accountId: string): string {
  return `wk_${accountId.replace(/^acc_/, '')}_${randomBytes(12).toString('base64url')}`;
}

/** The account a widget key claims to belong to, or null when it is not shaped like one. */
export function accountOfWidgetKey(key: string): string | null {
  const m = /^wk_([0-9A-Z]{26})_[A-Za-z0-9_-]{16}$/.exec(key);
  return m ? `acc_${m[1]}` : null;
}

/** The shared secret a site signs visitor identifiers with (hex HMAC-SHA256 keyed with it). */
export function newIdentitySecret(): string {
  return `wcs_${randomBytes(32).toString('hex')}`;
}

/**
 * An allowed origin is a scheme, a host and an optional port, exactly what a browser sends in
 * `Origin`: `https://shop.example` or `http://localhost:8080` (a trailing `/` is tolerated).
 * Answers the origin as browsers write it, or null when `value` is anything else.
 */
export function normaliseOrigin(value: string): string | null {
  const trimmed = value.trim().replace(/\/$/, '');
  // Nothing after the authority: no path, query or fragment; no user info.
  if (!/^https?:\/\/[^/?#@\s]+$/i.test(trimmed)) return null;
  try {
    const url = new URL(trimmed);
    return url.hostname ? url.origin : null;
  } catch {
    return null;
  }
}

/** Checks a PUT body and answers the settings it stands for (the widget key is the caller's). */
export function webchatSettings(
  body: WebchatConnectInput,
  widget: { widgetKey: string; widgetUrl: string },
): WebchatSettings {
  const details: ErrorDetail[] = [];
  const origins: string[] = [];
  body.allowed_origins.forEach((given, i) => {
    const origin = normaliseOrigin(given);
    if (!origin)
      details.push({
        field: `allowed_origins[${i}]`,
        issue: 'must be an origin: http(s)://host[:port], without a path, query or fragment',
      });
    else if (!origins.includes(origin)) origins.push(origin);
  });
  if (body.allowed_origins.length === 0)
    details.push({ field: 'allowed_origins', issue: 'must name at least one origin' });
  if (body.color !== undefined && !COLOR.test(body.color))
    details.push({ field: 'color', issue: 'must be a colour as #rrggbb' });
  const title = body.title?.trim();
  if (body.title !== undefined && !title)
    details.push({ field: 'title', issue: 'must not be empty' });
  if (details.length > 0) {
    throw new AppError(
      'validation_error',
      details.map((d) => `${d.field}: ${d.issue}`).join('; '),
      422,
      details,
    );
  }
  const greeting = body.greeting?.trim();
  return {
    widget_key: widget.widgetKey,
    allowed_origins: origins,
    identity_verification: body.identity_verification,
    title: title || DEFAULT_TITLE,
    greeting: greeting || null,
    color: (body.color ?? DEFAULT_COLOR).toLowerCase(),
    widget_url: widget.widgetUrl,
  };
}

/** Reads stored settings back (they are JSON in the connection row). */
export function readWebchatSettings(settings: Record<string, unknown>): WebchatSettings {
  return settings as unknown as WebchatSettings;
}
