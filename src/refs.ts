/**
 * The API's ids: a prefix and the row's number (`msg_12`, `camp_3`). Every module formats and reads them here, so
 * that naming another module's row does not mean importing that module.
 */
export const messageRef = (id: number) => `msg_${id}`;
export const campaignRef = (id: number) => `camp_${id}`;
export const accountRef = (id: number) => `cha_${id}`;
export const templateRef = (id: number) => `tpl_${id}`;
export const conversationRef = (id: number) => `conv_${id}`;
export const inboundRef = (id: number) => `in_${id}`;
export const surveyRef = (id: number) => `svy_${id}`;
export const runRef = (id: number) => `srun_${id}`;
export const responseRef = (id: number) => `sres_${id}`;

/** `camp_12` or `12` -> 12; anything else -> undefined. */
export function parseRef(prefix: string, value: string): number | undefined {
  const match = new RegExp(`^(?:${prefix}_)?(\\d{1,15})$`).exec(value.trim());
  return match ? Number(match[1]) : undefined;
}

/** Whether a value is a template's id (`tpl_<n>`), as a message's `template_id` holds one. */
export function isTemplateRef(value: string | null | undefined): value is string {
  return typeof value === 'string' && /^tpl_\d{1,15}$/.test(value);
}

/** The number of a template's id that isTemplateRef accepted (`tpl_12` -> 12). */
export const templateNumber = (ref: string): number => parseRef('tpl', ref)!;
