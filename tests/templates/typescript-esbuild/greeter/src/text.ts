export const shout = (text: string): string => `${text.toUpperCase()}!`;
