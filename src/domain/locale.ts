// The languages the bot writes in (`CCWEB_LOCALE`). Here, not in messages/, because config/ (the
// platform) parses the key and the platform imports no part; messages/catalogue.ts keeps
// one catalogue per code (`Record<Locale, Messages>`: the compiler refuses a code without one) and
// re-exports these for the parts that write texts.

export const LOCALES = ['zh', 'en'] as const;
export type Locale = (typeof LOCALES)[number];
export const DEFAULT_LOCALE: Locale = 'zh';

export function isLocale(value: string): value is Locale {
  return (LOCALES as readonly string[]).includes(value);
}
