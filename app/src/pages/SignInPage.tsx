import { useState } from 'preact/hooks';
import { ApiError } from '../api/client.js';
import { signIn } from '../modules/session/session.js';
import { AuthCard, Field } from '../ui/AuthCard.js';

interface AccountChoice {
  id: string;
  name: string;
}

export function SignInPage() {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [accounts, setAccounts] = useState<AccountChoice[] | null>(null);
  const [accountId, setAccountId] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [pending, setPending] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    setPending(true);
    setError(null);
    try {
      await signIn({ email, password, ...(accountId ? { account_id: accountId } : {}) });
    } catch (err) {
      if (err instanceof ApiError && err.status === 409) {
        const body = err.body as { error?: { accounts?: AccountChoice[] } };
        setAccounts(body.error?.accounts ?? []);
        setError('This email has several accounts: choose one.');
      } else if (err instanceof ApiError && err.status === 401) {
        setError('Wrong email or password.');
      } else if (err instanceof ApiError && err.status === 429) {
        setError('Too many attempts. Wait a few minutes and try again.');
      } else {
        setError(err instanceof Error ? err.message : 'Sign-in failed.');
      }
    } finally {
      setPending(false);
    }
  };

  return (
    <AuthCard title="Sign in to Switchboard" error={error}>
      <form onSubmit={(e) => void submit(e)} class="auth-form">
        <Field label="Email">
          <input
            type="email"
            autocomplete="username"
            required
            value={email}
            onInput={(e) => setEmail(e.currentTarget.value)}
          />
        </Field>
        <Field label="Password">
          <input
            type="password"
            autocomplete="current-password"
            required
            value={password}
            onInput={(e) => setPassword(e.currentTarget.value)}
          />
        </Field>
        {accounts && (
          <fieldset class="accounts">
            <legend>Account</legend>
            {accounts.map((a) => (
              <label key={a.id} class="radio">
                <input
                  type="radio"
                  name="account"
                  value={a.id}
                  checked={accountId === a.id}
                  onChange={() => setAccountId(a.id)}
                />
                {a.name}
              </label>
            ))}
          </fieldset>
        )}
        <button type="submit" class="button primary" disabled={pending}>
          Sign in
        </button>
      </form>
    </AuthCard>
  );
}
