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
export const importJobRef = (id: number) => `imp_${id}`;

/** An id as the API writes it, `<prefix>_<n>` (the API document's pattern for ids in answers). */
export const refPattern = (prefix: string) => `^${prefix}_[0-9]{1,15}$`;

/**
 * An id as a client may send it: `<prefix>_<n>` or just `<n>`, spaces around it ignored. The API document's
 * pattern for ids in requests (RefInput), and what parseRef reads: the two cannot disagree.
 */
export const refInputPattern = (prefix: string) => `^\\s*(?:${prefix}_)?([0-9]{1,15})\\s*$`;

const inputPatterns = new Map<string, RegExp>();

/** `camp_12`, `12` or ` camp_12 ` -> 12; anything else -> undefined. */
export function parseRef(prefix: string, value: string): number | undefined {
  let pattern = inputPatterns.get(prefix);
  if (!pattern) inputPatterns.set(prefix, (pattern = new RegExp(refInputPattern(prefix))));
  const match = pattern.exec(value);
  return match ? Number(match[1]) : undefined;
}

const templatePattern = new RegExp(refPattern('tpl'));

/** Whether a value is a template's id (`tpl_<n>`), as a message's `template_id` holds one. */
export function isTemplateRef(value: string | null | undefined): value is string {
  return typeof value === 'string' && templatePattern.test(value);
}

/** The number of a template's id that isTemplateRef accepted (`tpl_12` -> 12). */
export const templateNumber = (ref: string): number => parseRef('tpl', ref)!;

export const turfRef = (id: number) => `turf_${id}`;
export const visitRef = (id: number) => `vis_${id}`;
export const markRef = (id: number) => `mark_${id}`;
