/** The `workspaces.name` column's length, in characters. */
export const WORKSPACE_NAME_MAX = 200;

/** "<name>'s campaign", the name shortened (by characters, never inside one) so that the whole fits its column. */
export function defaultWorkspaceName(name: string): string {
  const suffix = "'s campaign";
  const chars = [...name];
  const room = WORKSPACE_NAME_MAX - suffix.length;
  if (chars.length <= room) return `${name}${suffix}`;
  return `${chars
    .slice(0, room - 1)
    .join('')
    .trimEnd()}…${suffix}`;
}
