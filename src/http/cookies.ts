/** The inbox session's cookie. */
export const SESSION_COOKIE = 'sb_session';

/** The value of cookie `name` in a Cookie header, if it is there once. */
export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  let found: string | undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== name) continue;
    if (found !== undefined) return undefined; // two of them: trust neither
    found = part.slice(eq + 1).trim();
  }
  return found;
}

/** A Set-Cookie value for the session cookie (an empty value with Max-Age 0 clears it). */
export function sessionCookie(
  value: string,
  opts: { secure: boolean; maxAgeSeconds: number },
): string {
  return [
    `${SESSION_COOKIE}=${value}`,
    'Path=/',
    'HttpOnly',
    'SameSite=Lax',
    `Max-Age=${opts.maxAgeSeconds}`,
    ...(opts.secure ? ['Secure'] : []),
  ].join('; ');
}
