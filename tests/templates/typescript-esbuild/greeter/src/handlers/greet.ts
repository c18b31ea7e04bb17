import { GetCallerIdentityCommand, STSClient } from "@aws-sdk/client-sts";
import ms from "ms";
import { shout } from "../text";
import type { GreetEvent, Greeting } from "../types";

const sts = new STSClient({});

export const handler = async (event: GreetEvent): Promise<Greeting> => {
  if (event.fail) {
    throw new Error("asked to fail");
  }
  const identity = await sts.send(new GetCallerIdentityCommand({}));
  return { message: shout(`hello, ${event.name ?? "world"}`), minute: ms(60_000), account: identity.Account ?? "" };
};
