import { useState } from 'preact/hooks';
import { api, ApiError, data } from '../../api/client.js';
import { queryClient } from '../../lib/query.js';
import { keys } from '../../api/keys.js';
import { Field } from '../../ui/AuthCard.js';
import { currentSession, loadSession } from '../session/session.js';
import { errorText } from '../../api/errors.js';
import './team/settings-screens.css';

/**
 * Settings › Your account, for everyone: who they are, their name (an admin renames anyone,
 * themselves included; an agent's name is changed by an admin: PATCH /v1/users is an admin
 * route), and their password.
 */
export function AccountSettings(_props: { rest: string[] }) {
  const { user, account } = currentSession();
  return (
    <div class="screen">
      <h1 id="page-title">Your account</h1>
      <section class="card" aria-labelledby="profile-title">
        <h2 id="profile-title">Profile</h2>
        <dl class="account-facts">
          <dt>Email</dt>
          <dd>{user.email}</dd>
          <dt>Role</dt>
          <dd>{user.role === 'admin' ? 'Admin' : 'Agent'}</dd>
          <dt>Account</dt>
          <dd>{account.name}</dd>
          {user.role !== 'admin' && (
            <>
              <dt>Name</dt>
              <dd>
                {user.name} <span class="muted small">(an admin can change it)</span>
              </dd>
            </>
          )}
        </dl>
        {user.role === 'admin' && <NameForm id={user.id} name={user.name} />}
      </section>
      <PasswordForm />
    </div>
  );
}

function NameForm(props: { id: string; name: string }) {
  const [name, setName] = useState(props.name);
  const [error, setError] = useState<string | null>(null);
  const [saved, setSaved] = useState(false);
  const save = async (event: Event) => {
    event.preventDefault();
    setError(null);
    setSaved(false);
    try {
      await data(
        api.PATCH('/v1/users/{id}', {
          params: { path: { id: props.id } },
          body: { name: name.trim() },
        }),
      );
      await loadSession();
      await queryClient.invalidateQueries({ queryKey: keys.users() });
      setSaved(true);
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <form class="inline-form" onSubmit={(e) => void save(e)}>
      <Field label="Name">
        <input
          required
          maxLength={255}
          value={name}
          onInput={(e) => setName(e.currentTarget.value)}
        />
      </Field>
      <button type="submit" class="button">
        Save name
      </button>
      <p role="status" class="hint">
        {saved ? 'Name saved.' : ''}
      </p>
      {error && (
        <p role="alert" class="alert">
          {error}
        </p>
      )}
    </form>
  );
}

function PasswordForm() {
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [confirm, setConfirm] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [done, setDone] = useState(false);
  const [pending, setPending] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    setError(null);
    setDone(false);
    if (next !== confirm) {
      setError('The new password and its confirmation differ.');
      return;
    }
    setPending(true);
    try {
      await data(
        api.POST('/v1/session/password', {
          body: { current_password: current, new_password: next },
        }),
      );
      setCurrent('');
      setNext('');
      setConfirm('');
      setDone(true);
    } catch (err) {
      const wrong =
        err instanceof ApiError &&
        err.status === 422 &&
        JSON.stringify(err.body).includes('current_password');
      setError(wrong ? 'Your current password is wrong.' : errorText(err));
    } finally {
      setPending(false);
    }
  };

  return (
    <section class="card" aria-labelledby="password-title">
      <h2 id="password-title">Password</h2>
      <form class="stack" onSubmit={(e) => void submit(e)}>
        <Field label="Current password">
          <input
            type="password"
            autocomplete="current-password"
            required
            value={current}
            onInput={(e) => setCurrent(e.currentTarget.value)}
          />
        </Field>
        <Field label="New password" hint="At least 10 characters.">
          <input
            type="password"
            autocomplete="new-password"
            required
            minLength={10}
            value={next}
            onInput={(e) => setNext(e.currentTarget.value)}
          />
        </Field>
        <Field label="Confirm new password">
          <input
            type="password"
            autocomplete="new-password"
            required
            minLength={10}
            value={confirm}
            onInput={(e) => setConfirm(e.currentTarget.value)}
          />
        </Field>
        {error && (
          <p role="alert" class="alert">
            {error}
          </p>
        )}
        <p role="status" class="hint">
          {done ? 'Password changed. Your other sessions were signed out.' : ''}
        </p>
        <div>
          <button type="submit" class="button primary" disabled={pending}>
            Change password
          </button>
        </div>
      </form>
    </section>
  );
}
