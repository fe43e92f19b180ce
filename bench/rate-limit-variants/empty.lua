-- Variant: nothing but the script call (the floor of any EVALSHA with these KEYS/ARGV).
return { 1, 0, 0, 0 }
