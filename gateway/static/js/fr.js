// French translations of the interface, keyed by the English text.
export const FR = {
};
