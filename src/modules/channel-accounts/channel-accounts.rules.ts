import type { MessageChannel } from '../../domain.ts';
import type { FieldErrors } from '../../errors.ts';
import { fieldProblem, fieldsOfSchema, type ProviderAdapter } from '../../providers/adapter.ts';

export type SettingValue = string | number | boolean;

/**
 * Checks an account's whole settings and credentials (after a PATCH's merge) against its adapter's schemas:
 * only the provider's named keys (own keys: `constructor`, `valueOf` and the other names every object inherits
 * are not settings), each of its type, the required ones and those its channels need. Problems name
 * `settings.x` or `credentials.x`.
 */
export function checkAccount(
  adapter: ProviderAdapter,
  channels: readonly MessageChannel[],
  settings: Record<string, unknown>,
  credentials: Record<string, unknown>,
  errors: FieldErrors,
): void {
  const { name: provider, channels: served } = adapter;
  const foreign = channels.filter((c) => !served.includes(c));
  if (channels.length === 0) errors.channels = [`must name at least one of ${served.join(', ')}.`];
  else if (foreign.length > 0)
    errors.channels = [`${provider} serves ${served.join(', ')}; it cannot carry ${foreign.join(', ')}.`];
  const channelNeeds = (name: string) => channels.filter((c) => adapter.channelSettings?.[c]?.includes(name));
  for (const [part, schema, values] of [
    ['setting', adapter.settings, settings],
    ['credential', adapter.credentials, credentials],
  ] as const) {
    const fields = fieldsOfSchema(schema);
    const known = new Map(fields.map(([name, field]) => [name, field]));
    const plural = `${part}s`;
    for (const [name, value] of Object.entries(values)) {
      const key = `${plural}.${name}`;
      const field = Object.hasOwn(Object.fromEntries(known), name) ? known.get(name) : undefined;
      if (!field) {
        errors[key] = [
          known.size > 0
            ? `is not a ${part} of ${provider}: its ${plural} are ${[...known.keys()].join(', ')}.`
            : `is not a ${part}: ${provider} accounts have none.`,
        ];
        continue;
      }
      const problem = fieldProblem(field, value);
      if (problem) errors[key] = [problem];
    }
    for (const [name, , required] of fields) {
      const key = `${plural}.${name}`;
      const needed = required || channelNeeds(name).length > 0;
      if (!needed || values[name] !== undefined || errors[key]) continue;
      errors[key] = [
        required
          ? `is required on a ${provider} account.`
          : `is required for ${channelNeeds(name).join(' and ')} on a ${provider} account.`,
      ];
    }
  }
}

/** Without `channels`: each channel of the provider whose own settings are given (else its first). */
export function defaultChannels(
  adapter: ProviderAdapter,
  settings: Record<string, unknown>,
): MessageChannel[] {
  const served = adapter.channels.filter((channel) =>
    (adapter.channelSettings?.[channel] ?? []).every((name) => settings[name] !== undefined),
  );
  return served.length > 0 ? [...served] : [adapter.channels[0]!];
}
