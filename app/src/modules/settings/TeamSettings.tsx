import { useState } from 'preact/hooks';
import { ApiError } from '../../api/client.js';
import type { Team, User } from '../../api/types.js';
import { Field } from '../../ui/AuthCard.js';
import { Dialog } from '../../ui/Dialog.js';
import { currentSession } from '../session/session.js';
import { errorText } from '../../api/errors.js';
import { fullTime } from '../../lib/format.js';
import { ConfirmDialog } from '../../ui/ConfirmDialog.js';
import { CopyField } from '../../ui/Copy.js';
import './team/settings-screens.css';
import {
  createTeam,
  deleteTeam,
  inviteUser,
  newInviteLink,
  removeUser,
  updateTeam,
  updateUser,
  useTeams,
  useUsers,
  type Invite,
  type Role,
} from './team/team-data.js';

/** The 409 of the last admin, in words that say what to do. */
function refusal(err: unknown, user: User): string {
  if (err instanceof ApiError && err.status === 409)
    return `${user.name} is the account's last admin. Make another user an admin first.`;
  return errorText(err);
}

/** Settings › Team: the account's people (invite, role, new link, remove) and its teams. */
export function TeamSettings(_props: { rest: string[] }) {
  return (
    <div class="screen">
      <h1 id="page-title">Team</h1>
      <People />
      <Teams />
    </div>
  );
}

function People() {
  const users = useUsers();
  const me = currentSession().user;
  const [inviting, setInviting] = useState(false);
  const [link, setLink] = useState<{ user: User; invite: Invite } | null>(null);
  const [removing, setRemoving] = useState<User | null>(null);
  const [error, setError] = useState<string | null>(null);

  const changeRole = async (user: User, role: Role) => {
    setError(null);
    try {
      await updateUser(user.id, { role });
    } catch (err) {
      setError(refusal(err, user));
    }
  };
  const reinvite = async (user: User) => {
    setError(null);
    try {
      setLink({ user, invite: await newInviteLink(user.id) });
    } catch (err) {
      setError(errorText(err));
    }
  };

  return (
    <section class="stack" aria-labelledby="people-title">
      <div class="screen-head">
        <h2 id="people-title">People</h2>
        <button type="button" class="button primary" onClick={() => setInviting(true)}>
          Invite
        </button>
      </div>
      {error && (
        <p role="alert" class="alert">
          {error}
        </p>
      )}
      {users.isPending ? (
        <p class="muted">Loading people…</p>
      ) : users.isError ? (
        <p role="alert" class="alert">
          {errorText(users.error)}
        </p>
      ) : (
        <div class="table-wrap">
          <table class="table">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Email</th>
                <th scope="col">Role</th>
                <th scope="col">Status</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {(users.data ?? []).map((u) => (
                <tr key={u.id}>
                  <th scope="row">
                    {u.name}
                    {u.id === me.id && <span class="muted"> (you)</span>}
                  </th>
                  <td>{u.email}</td>
                  <td>
                    <select
                      aria-label={`Role of ${u.name}`}
                      value={u.role}
                      onChange={(e) => void changeRole(u, e.currentTarget.value as Role)}
                    >
                      <option value="agent">Agent</option>
                      <option value="admin">Admin</option>
                    </select>
                  </td>
                  <td>
                    <span class={`pill ${u.status}`}>
                      {u.status === 'invited' ? 'Invited' : 'Active'}
                    </span>
                  </td>
                  <td class="actions">
                    <button
                      type="button"
                      class="button small"
                      aria-label={`New invite link for ${u.name}`}
                      onClick={() => void reinvite(u)}
                    >
                      New invite link
                    </button>
                    <button
                      type="button"
                      class="button small"
                      aria-label={`Remove ${u.name}`}
                      onClick={() => setRemoving(u)}
                    >
                      Remove
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {inviting && (
        <InviteDialog
          onClose={() => setInviting(false)}
          onInvited={(user, invite) => {
            setInviting(false);
            setLink({ user, invite });
          }}
        />
      )}
      {link && <InviteLinkDialog {...link} onClose={() => setLink(null)} />}
      {removing && (
        <ConfirmDialog
          title={`Remove ${removing.name}?`}
          action="Remove"
          onClose={() => setRemoving(null)}
          onConfirm={async () => {
            try {
              await removeUser(removing.id);
            } catch (err) {
              throw new Error(refusal(err, removing));
            }
          }}
        >
          <p>
            {removing.name} is signed out at once and can no longer sign in. Their conversations
            become unassigned; what they wrote keeps their name.
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}

function InviteDialog(props: { onClose: () => void; onInvited: (u: User, i: Invite) => void }) {
  const [name, setName] = useState('');
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<Role>('agent');
  const [error, setError] = useState<string | null>(null);
  const [pending, setPending] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    setPending(true);
    setError(null);
    try {
      const created = await inviteUser({ name, email, role });
      props.onInvited(created, created);
    } catch (err) {
      setError(errorText(err));
      setPending(false);
    }
  };
  return (
    <Dialog title="Invite a colleague" onClose={props.onClose}>
      <form class="stack" onSubmit={(e) => void submit(e)}>
        <Field label="Name">
          <input required value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </Field>
        <Field label="Email">
          <input
            type="email"
            required
            value={email}
            onInput={(e) => setEmail(e.currentTarget.value)}
          />
        </Field>
        <Field
          label="Role"
          hint="Admins also manage channels, webhooks, templates, people and keys."
        >
          <select value={role} onChange={(e) => setRole(e.currentTarget.value as Role)}>
            <option value="agent">Agent</option>
            <option value="admin">Admin</option>
          </select>
        </Field>
        {error && (
          <p role="alert" class="alert">
            {error}
          </p>
        )}
        <div class="dialog-actions">
          <button type="button" class="button ghost" onClick={props.onClose}>
            Cancel
          </button>
          <button type="submit" class="button primary" disabled={pending}>
            Create invite link
          </button>
        </div>
      </form>
    </Dialog>
  );
}

/** The invite link, shown once: whoever holds it sets the password. */
function InviteLinkDialog(props: { user: User; invite: Invite; onClose: () => void }) {
  return (
    <Dialog title={`Invite link for ${props.user.name}`} onClose={props.onClose} wide>
      <div class="stack">
        <p>
          Send this link to {props.user.email}. It works once, until{' '}
          {fullTime(props.invite.expires_at)}, and is not shown again (an earlier link stops
          working).
        </p>
        <CopyField label="Invite link" value={props.invite.invite_url} />
        <div class="dialog-actions">
          <button type="button" class="button primary" onClick={props.onClose}>
            Done
          </button>
        </div>
      </div>
    </Dialog>
  );
}

function Teams() {
  const teams = useTeams();
  const users = useUsers();
  const [name, setName] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [editing, setEditing] = useState<Team | null>(null);
  const [deleting, setDeleting] = useState<Team | null>(null);
  const byId = new Map((users.data ?? []).map((u) => [u.id, u.name]));

  const create = async (event: Event) => {
    event.preventDefault();
    setError(null);
    try {
      await createTeam(name.trim());
      setName('');
    } catch (err) {
      setError(errorText(err));
    }
  };

  return (
    <section class="stack" aria-labelledby="teams-title">
      <h2 id="teams-title">Teams</h2>
      <form class="inline-form" onSubmit={(e) => void create(e)}>
        <Field label="Team name">
          <input required value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </Field>
        <button type="submit" class="button">
          Create team
        </button>
      </form>
      {error && (
        <p role="alert" class="alert">
          {error}
        </p>
      )}
      {teams.isPending ? (
        <p class="muted">Loading teams…</p>
      ) : (teams.data ?? []).length === 0 ? (
        <p class="muted">
          No team yet. Conversations can be assigned to a team as well as a person.
        </p>
      ) : (
        <ul class="team-list" aria-label="Teams">
          {(teams.data ?? []).map((t) => (
            <li key={t.id}>
              <span class="team-name">{t.name}</span>
              <span class="team-members">
                {t.user_ids.length === 0
                  ? 'No members'
                  : t.user_ids.map((id) => byId.get(id) ?? id).join(', ')}
              </span>
              <button
                type="button"
                class="button small"
                aria-label={`Edit ${t.name}`}
                onClick={() => setEditing(t)}
              >
                Edit
              </button>
              <button
                type="button"
                class="button small"
                aria-label={`Delete ${t.name}`}
                onClick={() => setDeleting(t)}
              >
                Delete
              </button>
            </li>
          ))}
        </ul>
      )}
      {editing && (
        <TeamDialog team={editing} users={users.data ?? []} onClose={() => setEditing(null)} />
      )}
      {deleting && (
        <ConfirmDialog
          title={`Delete ${deleting.name}?`}
          action="Delete"
          onClose={() => setDeleting(null)}
          onConfirm={() => deleteTeam(deleting.id)}
        >
          <p>Its conversations become unassigned. Its members stay in the account.</p>
        </ConfirmDialog>
      )}
    </section>
  );
}

/** Rename a team and choose its members. */
function TeamDialog(props: { team: Team; users: User[]; onClose: () => void }) {
  const [name, setName] = useState(props.team.name);
  const [members, setMembers] = useState(new Set(props.team.user_ids));
  const [error, setError] = useState<string | null>(null);
  const [pending, setPending] = useState(false);
  const save = async (event: Event) => {
    event.preventDefault();
    setPending(true);
    setError(null);
    try {
      await updateTeam(props.team.id, { name: name.trim(), user_ids: [...members] });
      props.onClose();
    } catch (err) {
      setError(errorText(err));
      setPending(false);
    }
  };
  const toggle = (id: string, on: boolean) => {
    const next = new Set(members);
    if (on) next.add(id);
    else next.delete(id);
    setMembers(next);
  };
  return (
    <Dialog title={`Edit ${props.team.name}`} onClose={props.onClose}>
      <form class="stack" onSubmit={(e) => void save(e)}>
        <Field label="Name">
          <input required value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </Field>
        <fieldset class="members">
          <legend>Members</legend>
          {props.users.map((u) => (
            <label key={u.id} class="radio">
              <input
                type="checkbox"
                checked={members.has(u.id)}
                onChange={(e) => toggle(u.id, e.currentTarget.checked)}
              />
              {u.name}
            </label>
          ))}
        </fieldset>
        {error && (
          <p role="alert" class="alert">
            {error}
          </p>
        )}
        <div class="dialog-actions">
          <button type="button" class="button ghost" onClick={props.onClose}>
            Cancel
          </button>
          <button type="submit" class="button primary" disabled={pending}>
            Save team
          </button>
        </div>
      </form>
    </Dialog>
  );
}
