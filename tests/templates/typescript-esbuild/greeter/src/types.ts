export interface GreetEvent {
  name?: string;
  fail?: boolean;
}

export interface Greeting {
  message: string;
  minute: string;
  account: string;
}
