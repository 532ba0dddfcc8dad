// A text as a regular expression that matches exactly that text (the characters regex
// syntax gives a meaning to, escaped): for patterns built from words, such as a
// template's tags or a tokenizer's added tokens.
export const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
