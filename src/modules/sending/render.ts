/**
 * Template variables: `{{name}}`, `{{first_name}}`, `{{name_local}}`, `{{first_name_local}}` (the roll's
 * own-script name, else the name), `{{constituency}}`, `{{booth}}`, `{{ward}}` (the place's name where the
 * workspace keeps one, else the roll's spelling) (spaces inside the braces allowed), rendered from a voter
 * record; a recipient who is not a voter renders them empty, or as the fallback a variable gives:
 * `{{first_name|friend}}` is "friend" where the first name is empty.
 */
export const templateVariables = [
  'name',
  'first_name',
  'name_local',
  'first_name_local',
  'constituency',
  'booth',
  'ward',
] as const;

const VARIABLE = /\{\{\s*([^{}]*?)\s*\}\}/g;

/** A variable's name and its fallback (`first_name|friend`), each trimmed. */
function parts(inside: string): [string, string] {
  const bar = inside.indexOf('|');
  return bar < 0 ? [inside.trim(), ''] : [inside.slice(0, bar).trim(), inside.slice(bar + 1).trim()];
}

/** The variables a body uses that are not allowed, in order of appearance, without repeats. */
export function unknownVariables(body: string): string[] {
  const unknown = new Set<string>();
  for (const match of body.matchAll(VARIABLE)) {
    const [name] = parts(match[1] ?? '');
    if (!(templateVariables as readonly string[]).includes(name)) unknown.add(name);
  }
  return [...unknown];
}

export interface VoterFields {
  name: string | null;
  /** The name in the roll's own script (Devanagari), where the roll gives it. */
  name_local?: string | null | undefined;
  constituency: string | null;
  booth: string | null;
  ward: string | null;
}

/** `overrides`: values given for some variables (a conversation's template reply), used instead of the voter's. */
export type VariableOverrides = Readonly<Record<string, string>> | undefined;

export function renderTemplate(
  body: string,
  voter: VoterFields | undefined,
  overrides?: VariableOverrides,
): string {
  return body.replace(VARIABLE, (_all, inside: string) => valueOf(inside, voter, overrides));
}

function valueOf(inside: string, voter: VoterFields | undefined, overrides: VariableOverrides): string {
  const [name, fallback] = parts(inside);
  return (overrides?.[name] ?? variableValue(name, voter)) || fallback;
}

/** Each variable of `body` where it appears (repeats included), with its value for `voter`. */
export function variableValues(
  body: string,
  voter: VoterFields | undefined,
  overrides?: VariableOverrides,
): Array<[string, string]> {
  return [...body.matchAll(VARIABLE)].map((match) => {
    const inside = match[1] ?? '';
    return [parts(inside)[0], valueOf(inside, voter, overrides)];
  });
}

function variableValue(name: string, voter: VoterFields | undefined): string {
  if (!voter) return '';
  switch (name) {
    case 'name':
      return voter.name?.trim() ?? '';
    case 'first_name':
      return voter.name?.trim().split(/\s+/u)[0] ?? '';
    case 'name_local':
      return voter.name_local?.trim() || (voter.name?.trim() ?? '');
    case 'first_name_local':
      return (voter.name_local?.trim() || voter.name?.trim() || '').split(/\s+/u)[0] ?? '';
    case 'constituency':
      return voter.constituency ?? '';
    case 'booth':
      return voter.booth ?? '';
    case 'ward':
      return voter.ward ?? '';
    default:
      return '';
  }
}

/** Every variable's value for `voter` (a reply box shows what an empty field will be). */
export function voterVariables(voter: VoterFields | undefined): Record<string, string> {
  return Object.fromEntries(templateVariables.map((name) => [name, variableValue(name, voter)]));
}
