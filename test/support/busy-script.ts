import { redisClient, waitFor } from './helpers';

/**
 * Runs `during` while another client's Lua script spins past `busy-reply-threshold` on `url`:
 * Redis answers every other command `BUSY` (only `SCRIPT KILL` and `SHUTDOWN NOSAVE` pass). The
 * script is killed once `during` settled, and the threshold set back to Redis's default.
 */
export async function whileBusy<T>(url: string, during: () => Promise<T>): Promise<T> {
  const spinner = redisClient(url);
  const admin = redisClient(url);
  try {
    await admin.config('SET', 'busy-reply-threshold', '50');
    const spinning = spinner.eval('while true do end', 0).catch(() => undefined);
    await waitFor('the script past its threshold', () =>
      admin.ping().then(
        () => false,
        (err: Error) => err.message.startsWith('BUSY '),
      ),
    );
    try {
      return await during();
    } finally {
      await admin.script('KILL').catch(() => undefined);
      await spinning;
    }
  } finally {
    await admin.config('SET', 'busy-reply-threshold', '5000');
    spinner.disconnect();
    admin.disconnect();
  }
}
