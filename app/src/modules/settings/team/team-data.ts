// The account's people and teams, as the settings screen and the assignment menu read them
// (one cache entry each: the inbox's "Assign" menu sees a new colleague at once).
import { api, data } from '../../../api/client.js';
import { keys } from '../../../api/keys.js';
import type { Team, User } from '../../../api/types.js';
import { queryClient, useQuery } from '../../../lib/query.js';

export type Role = User['role'];
export interface Invite {
  invite_url: string;
  expires_at: string;
}

export function useUsers() {
  return useQuery<User[]>({
    queryKey: keys.users(),
    queryFn: async ({ signal }) =>
      (await data(api.GET('/v1/users', { params: { query: { limit: 100 } }, signal }))).data,
  });
}

export function useTeams() {
  return useQuery<Team[]>({
    queryKey: keys.teams(),
    queryFn: async ({ signal }) =>
      (await data(api.GET('/v1/teams', { params: { query: { limit: 100 } }, signal }))).data,
  });
}

const refreshUsers = () => queryClient.invalidateQueries({ queryKey: keys.users() });
const refreshTeams = () => queryClient.invalidateQueries({ queryKey: keys.teams() });

export async function inviteUser(body: {
  name: string;
  email: string;
  role: Role;
}): Promise<User & Invite> {
  const created = await data(api.POST('/v1/users', { body }));
  await refreshUsers();
  return created;
}

export async function newInviteLink(id: string): Promise<Invite> {
  return data(api.POST('/v1/users/{id}/invite', { params: { path: { id } } }));
}

export async function updateUser(id: string, body: { name?: string; role?: Role }): Promise<User> {
  try {
    return await data(api.PATCH('/v1/users/{id}', { params: { path: { id } }, body }));
  } finally {
    await refreshUsers();
  }
}

export async function removeUser(id: string): Promise<void> {
  await api.DELETE('/v1/users/{id}', { params: { path: { id } } });
  // Their teams lose them too.
  await Promise.all([refreshUsers(), refreshTeams()]);
}

export async function createTeam(name: string): Promise<Team> {
  const team = await data(api.POST('/v1/teams', { body: { name } }));
  await refreshTeams();
  return team;
}

export async function updateTeam(
  id: string,
  body: { name?: string; user_ids?: string[] },
): Promise<Team> {
  const team = await data(api.PATCH('/v1/teams/{id}', { params: { path: { id } }, body }));
  await refreshTeams();
  return team;
}

export async function deleteTeam(id: string): Promise<void> {
  await api.DELETE('/v1/teams/{id}', { params: { path: { id } } });
  await refreshTeams();
}
