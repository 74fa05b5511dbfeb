import { useState } from 'preact/hooks';
import { ApiError } from '../api/client.js';
import { navigate } from '../lib/router.js';
import { acceptInvite } from '../modules/session/session.js';
import { AuthCard, Field } from '../ui/AuthCard.js';

/** The token travels in the fragment (never sent to a server, never in a log); read it once. */
function tokenFromFragment(): string {
  return new URLSearchParams(location.hash.slice(1)).get('token') ?? '';
}

/** `/app/setup#token=…` (the first admin: name, email, password) and `/app/invite#token=…`. */
export function AcceptInvitePage({ setup }: { setup: boolean }) {
  const [token] = useState(tokenFromFragment);
  const [name, setName] = useState('');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<string | null>(token ? null : 'This link has no token.');
  const [pending, setPending] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    if (password.length < 10) {
      setError('The password needs at least 10 characters.');
      return;
    }
    setPending(true);
    setError(null);
    try {
      await acceptInvite({
        token,
        password,
        ...(name ? { name } : {}),
        ...(setup ? { email } : {}),
      });
      navigate('/inbox', { replace: true });
    } catch (err) {
      setError(
        err instanceof ApiError && err.status === 404
          ? 'This link is unknown, used or expired. Ask an admin for a new one.'
          : err instanceof Error
            ? err.message
            : 'That did not work.',
      );
    } finally {
      setPending(false);
    }
  };

  return (
    <AuthCard
      title={setup ? 'Create the first admin' : 'Join your team on Switchboard'}
      error={error}
    >
      <form onSubmit={(e) => void submit(e)} class="auth-form">
        <Field label="Name">
          <input
            autocomplete="name"
            required={setup}
            value={name}
            onInput={(e) => setName(e.currentTarget.value)}
          />
        </Field>
        {setup && (
          <Field label="Email">
            <input
              type="email"
              autocomplete="username"
              required
              value={email}
              onInput={(e) => setEmail(e.currentTarget.value)}
            />
          </Field>
        )}
        <Field label="Password" hint="At least 10 characters.">
          <input
            type="password"
            autocomplete="new-password"
            required
            minLength={10}
            value={password}
            onInput={(e) => setPassword(e.currentTarget.value)}
          />
        </Field>
        <button type="submit" class="button primary" disabled={pending || !token}>
          {setup ? 'Create account' : 'Accept invite'}
        </button>
      </form>
    </AuthCard>
  );
}
