export const NAME = 'esm-helper';
