// What the chat's modules share: the open conversation, the models and
// sources offered, the sources this conversation may read, and the run going
// (its block, for Stop). Also the changes a message waits for before it is sent.

export const state = {
  conversationId: null,
  models: [],
  sources: null,
  allowed: null,
  webConfirmed: false,
  running: null,
};

// Changes a message depends on (opening or creating a conversation, saving
// the sources just ticked) finish before it is sent: sent meanwhile, it would
// go to the previous conversation (its run then wiped from the log as the new
// one is drawn) or be read without those sources.
let settling = Promise.resolve();

export function beforeNextMessage(change) {
  settling = Promise.allSettled([settling, change]);
  return change;
}

// Settles once every change given so far has.
export const settled = () => settling;
